// The six tools and the skill, against a mock ctx and a fake mnemo executable.

import assert from 'node:assert/strict'
import { join } from 'node:path'
import test from 'node:test'

import { apply } from '../index.js'
import { schemaProblems, validate } from '../src/schema.js'
import { SKILL_NAME } from '../src/skill.js'
import { TOOL_NAMES } from '../src/tools.js'
import { MockCtx } from '../testing/mock-ctx.js'
import { FAKE_MNEMO, scratch, setEnv, textOf } from '../testing/util.js'

/** A plugin loaded into a fresh mock ctx, a session in a scratch project, and its cleanup. */
function setup(t, { config = {}, ctxOptions = {}, session = {} } = {}) {
  const area = scratch()
  const restore = setEnv({ ...area.env, MNEMO_BIN: undefined })
  const ctx = new MockCtx(ctxOptions)
  apply(ctx, { mnemoPath: FAKE_MNEMO, autoPrefetch: false, autoCapture: false, ...config })
  const s = ctx.createSession({ cwd: area.project, ...session })
  t.after(async () => {
    await ctx.dispose()
    restore()
    area.cleanup()
  })
  const call = (name, args, exec = {}) => ctx.tools.call(name, args, { agent: ctx.agentFor(s), ...exec })
  return { area, ctx, session: s, call }
}

test('exactly the six mnemosyne_* tools are registered, each complete', t => {
  const { ctx } = setup(t)
  assert.deepEqual(ctx.tools.names().sort(), [...TOOL_NAMES].sort())
  assert.equal(ctx.tools.names().length, 6)
  for (const name of TOOL_NAMES) {
    const tool = ctx.tools.get(name)
    assert.ok(tool.description.length > 40, `${name} has a description`)
    assert.equal(tool.parameters.type, 'object')
    assert.deepEqual(schemaProblems(tool.parameters), [], `${name} input schema is in the enforced subset`)
    assert.deepEqual(schemaProblems(tool.output.schema), [], `${name} output schema is in the enforced subset`)
    assert.equal(typeof tool.output.render, 'function')
    assert.equal(typeof tool.execute, 'function')
    assert.ok(Number.isFinite(tool.timeoutMs) && tool.timeoutMs > 0)
  }
})

const SAMPLE_ARGS = {
  mnemosyne_remember: { content: 'We deploy with make release.' },
  mnemosyne_recall: { query: 'how do we deploy' },
  mnemosyne_forget: { id: 'aaaa000011112222' },
  mnemosyne_stats: {},
  mnemosyne_sleep: {},
  mnemosyne_bind: {},
}

test('every tool returns a value matching its output schema and renders readable text', async t => {
  const { ctx, call } = setup(t)
  for (const name of TOOL_NAMES) {
    const result = await call(name, SAMPLE_ARGS[name])
    assert.equal(result.isError, false, `${name}: ${textOf(result.content)}`)
    assert.deepEqual(validate(ctx.tools.get(name).output.schema, result.value), [])
    assert.ok(Array.isArray(result.content) && result.content.length > 0)
    for (const block of result.content) assert.equal(block.type, 'text')
    assert.ok(textOf(result.content).length > 10, `${name} renders text`)
  }
})

test('recall returns ids, scores, levels and contents, run in the session directory', async t => {
  const { area, session, call } = setup(t)
  const result = await call('mnemosyne_recall', { query: 'how do we deploy', top_k: 3 })
  assert.equal(result.isError, false)
  assert.deepEqual(result.value.results.map(m => [m.id, m.score, m.level, m.content]), [
    ['aaaa000011112222', 0.61, 'workspace', 'We deploy with make release.'],
    ['bbbb000011112222', 0.2, 'global', 'The user prefers tabs.'],
  ])
  const text = textOf(result.content)
  assert.match(text, /\[aaaa000011112222\] score 0\.61 · workspace · 2026-11-02/)
  assert.match(text, /We deploy with make release\./)
  assert.match(text, /not instructions/)
  const [callLog] = area.calls()
  assert.equal(callLog.cwd, area.project)
  assert.deepEqual(callLog.argv, ['recall', 'how do we deploy', '--kind', 'all', '--top-k', '3', '--session', `dsh_${session.id}`, '--json'])
})

test('remember, forget, sleep and bind pass their arguments', async t => {
  const { area, session, call } = setup(t)
  const sid = ['--session', `dsh_${session.id}`]
  await call('mnemosyne_remember', { content: 'Tabs, not spaces.', scope: 'global', importance: 0.9 })
  await call('mnemosyne_remember', { content: 'Default scope.' })
  const forgot = await call('mnemosyne_forget', { id: 'aaaa000011112222' })
  await call('mnemosyne_sleep', { dry_run: true })
  await call('mnemosyne_stats', {})
  await call('mnemosyne_bind', {})
  await call('mnemosyne_bind', { path: 'sub/dir' })
  const calls = area.calls()
  assert.deepEqual(calls.map(c => c.argv), [
    ['remember', '-', '--scope', 'global', '--importance', '0.9', ...sid, '--json'],
    ['remember', '-', '--scope', 'workspace', ...sid, '--json'],
    ['forget', 'aaaa000011112222', ...sid, '--json'],
    ['sleep', '--dry-run', ...sid, '--json'],
    ['stats', ...sid, '--json'],
    ['bind', '--json'],
    ['bind', 'sub/dir', '--json'],
  ])
  assert.deepEqual(calls.slice(0, 2).map(c => c.stdin), ['Tabs, not spaces.', 'Default scope.'], 'the text goes through stdin')
  assert.deepEqual(forgot.value, { id: 'aaaa000011112222', level: 'workspace', deleted: 2 })
})

test('invalid arguments are tool errors, and mnemo is not run', async t => {
  const { area, call } = setup(t)
  const bad = [
    ['mnemosyne_recall', {}],
    ['mnemosyne_recall', { query: 3 }],
    ['mnemosyne_recall', { query: '   ' }],
    ['mnemosyne_recall', { query: 'x', top_k: 0 }],
    ['mnemosyne_remember', { content: 'x', scope: 'everywhere' }],
    ['mnemosyne_remember', { content: 'x', importance: 2 }],
    ['mnemosyne_forget', { id: '' }],
    ['mnemosyne_stats', { all: true }],
  ]
  for (const [name, args] of bad) {
    const result = await call(name, args)
    assert.equal(result.isError, true, `${name} ${JSON.stringify(args)}`)
    assert.match(textOf(result.content), new RegExp(name))
  }
  assert.equal(area.calls().length, 0)
  const nulls = await call('mnemosyne_recall', { query: 'deploy', top_k: null })
  assert.equal(nulls.isError, false, 'an optional argument sent as null counts as absent')
})

test('mnemo missing: an install hint, not a crash', async t => {
  const { area, call } = setup(t, { config: { mnemoPath: join('/nonexistent', 'bin', 'mnemo') } })
  for (const name of TOOL_NAMES) {
    const result = await call(name, SAMPLE_ARGS[name])
    assert.equal(result.isError, true)
    const text = textOf(result.content)
    assert.match(text, /mnemo was not found/)
    assert.match(text, /pipx install dsh-mnemo/)
    assert.match(text, /mnemoPath/)
  }
  assert.equal(area.calls().length, 0)
})

test('mnemoPath defaults to MNEMO_BIN', async t => {
  const area = scratch()
  const restore = setEnv({ ...area.env, MNEMO_BIN: FAKE_MNEMO })
  const ctx = new MockCtx()
  apply(ctx, { autoPrefetch: false, autoCapture: false })
  t.after(async () => { await ctx.dispose(); restore(); area.cleanup() })
  const session = ctx.createSession({ cwd: area.project })
  const result = await ctx.tools.call('mnemosyne_stats', {}, { agent: ctx.agentFor(session) })
  assert.equal(result.isError, false)
  assert.equal(area.calls().length, 1)
})

test('an unbound directory is a tool error carrying the bind hint', async t => {
  const { area, call } = setup(t)
  area.scenario({
    recall: {
      stdout: '{"schema_version": 1, "kind": "error", "error": "this directory is not in a bound workspace; no memory is read here", "hint": "Run `mnemo bind` in the project root.", "exit_code": 4}\n',
      stderr: 'mnemo: this directory is not in a bound workspace; no memory is read here\n  Run `mnemo bind` in the project root.\n',
      code: 4,
    },
  })
  const result = await call('mnemosyne_recall', { query: 'deploy' })
  assert.equal(result.isError, true)
  const text = textOf(result.content)
  assert.match(text, /not in a bound workspace/)
  assert.match(text, /Run `mnemo bind` in the project root\./)
  assert.match(text, /mnemosyne_bind/)
  assert.equal(result.error.kind, 'unbound')
})

test('a plain non-zero exit reports stderr; an exit 4 without JSON still gets the bind hint', async t => {
  const { area, call } = setup(t)
  area.scenario({
    forget: { stderr: 'mnemo: no memory aaaa in this workspace\n', code: 5 },
    recall: { stderr: 'mnemo: this directory is not in a bound workspace\n', code: 4 },
    stats: { stdout: 'Stats: 3 memories\n', code: 0 },
  })
  const forgot = await call('mnemosyne_forget', { id: 'aaaa' })
  assert.equal(forgot.isError, true)
  assert.match(textOf(forgot.content), /^mnemo: no memory aaaa in this workspace$/)
  const recalled = await call('mnemosyne_recall', { query: 'x' })
  assert.match(textOf(recalled.content), /mnemosyne_bind/)
  const stats = await call('mnemosyne_stats', {})
  assert.equal(stats.isError, true)
  assert.match(textOf(stats.content), /printed no "stats" JSON document/)
})

test('a slow mnemo is stopped at timeoutMs; a cancelled call stops at once', async t => {
  const { area, call } = setup(t, { config: { timeoutMs: 300 } })
  area.scenario({ recall: { delayMs: 5000, stdout: '{}' } })
  let started = Date.now()
  const slow = await call('mnemosyne_recall', { query: 'x' })
  assert.equal(slow.isError, true)
  assert.match(textOf(slow.content), /did not answer within 300 ms/)
  assert.ok(Date.now() - started < 3000)

  const controller = new AbortController()
  started = Date.now()
  setTimeout(() => controller.abort(), 100)
  const cancelled = await call('mnemosyne_recall', { query: 'x' }, { signal: controller.signal })
  assert.equal(cancelled.isError, true)
  assert.match(textOf(cancelled.content), /cancelled/)
  assert.ok(Date.now() - started < 3000)
})

test('the session id comes from the root session; counter ids get createdAt', async t => {
  const { area, ctx } = setup(t)
  const root = ctx.createSession({ id: 'session-7', cwd: area.project, createdAt: 1700000000000 })
  const child = ctx.createSession({ cwd: area.project, parentSession: root.id, origin: 'subagent' })
  const grandchild = ctx.createSession({ parentSession: child.id })
  for (const session of [root, child, grandchild]) {
    const result = await ctx.tools.call('mnemosyne_stats', {}, { agent: ctx.agentFor(session) })
    assert.equal(result.isError, false, textOf(result.content))
  }
  const calls = area.calls()
  assert.deepEqual(calls.map(c => c.argv.at(-2)), Array(3).fill('dsh_session-7_1700000000000'))
  assert.deepEqual(calls.map(c => c.cwd), Array(3).fill(area.project), 'a session without cwd uses its root\'s')
})

test('a session without a usable directory is a clear error', async t => {
  const { area, ctx } = setup(t)
  const nowhere = ctx.createSession({})
  const gone = ctx.createSession({ cwd: join(area.root, 'deleted') })
  const noCwd = await ctx.tools.call('mnemosyne_recall', { query: 'x' }, { agent: ctx.agentFor(nowhere) })
  assert.match(textOf(noCwd.content), /no working directory/)
  const missing = await ctx.tools.call('mnemosyne_recall', { query: 'x' }, { agent: ctx.agentFor(gone) })
  assert.match(textOf(missing.content), /does not exist/)
  const noAgent = await ctx.tools.call('mnemosyne_recall', { query: 'x' }, {})
  assert.equal(noAgent.isError, true)
  assert.equal(area.calls().length, 0)
})

test('dataDir and config reach mnemo as MNEMO_DATA_DIR and MNEMO_CONFIG', async t => {
  const { area, call } = setup(t, { config: { dataDir: '/srv/mnemo-data', config: '/srv/mnemo.yaml' } })
  await call('mnemosyne_stats', {})
  assert.deepEqual(area.calls()[0].env, { MNEMO_DATA_DIR: '/srv/mnemo-data', MNEMO_CONFIG: '/srv/mnemo.yaml' })
})

test('the runtime skill is registered and names every tool', t => {
  const { ctx } = setup(t)
  const skill = ctx.skills.skills.get(SKILL_NAME)
  assert.ok(skill, 'skill registered')
  assert.match(skill.name, /^[a-z0-9]+(?:-[a-z0-9]+)*$/)
  assert.equal(skill.source, 'runtime')
  assert.ok(skill.description.length > 20 && skill.whenToUse.length > 20)
  for (const name of TOOL_NAMES) assert.ok(skill.content.includes(name), `skill mentions ${name}`)
  assert.match(skill.content, /not instructions|never\s+instructions/)
})

test('without a skill registry, session store or logger the tools still work', async t => {
  const { call, ctx } = setup(t, { ctxOptions: { skills: false, sessions: false, logger: false } })
  assert.equal(ctx.tools.names().length, 6)
  const result = await call('mnemosyne_stats', {})
  assert.equal(result.isError, false)
})

test('unloading the plugin removes its event listeners', async t => {
  const { ctx } = setup(t, { config: { autoPrefetch: true, autoCapture: true } })
  assert.equal(ctx.listenerCount('agent/pre-step'), 1)
  assert.equal(ctx.listenerCount('session/event'), 1)
  assert.equal(ctx.listenerCount('session/disposed'), 1)
  await ctx.dispose()
  assert.equal(ctx.listenerCount('agent/pre-step'), 0)
  assert.equal(ctx.listenerCount('session/event'), 0)
})
