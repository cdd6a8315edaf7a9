// The plugin against the real mnemo, in a throwaway HOME, data dir and config.
//
// mnemo: $MNEMO_BIN, else ../../.venv/bin/mnemo relative to this package (the
// checkout's scripts/bootstrap.sh creates it).  Skipped when neither exists.

import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import test from 'node:test'

import { apply } from '../index.js'
import { MockCtx, userMessage } from '../testing/mock-ctx.js'
import { PACKAGE_DIR, setEnv, textOf, waitFor } from '../testing/util.js'


/** True while a mnemo hook worker holds its file in DATA/hook-state/work (see hook/background.py). */
function workersBusy (data) {
  const folder = join(data, 'hook-state', 'work')
  if (!existsSync(folder)) return false
  return readdirSync(folder).some(name => {
    const pid = Number(name.replace(/\.lock$/, ''))
    if (!Number.isInteger(pid) || pid <= 0) return false
    try { process.kill(pid, 0); return true } catch { return false }
  })
}

const MNEMO = process.env.MNEMO_BIN ? resolve(process.env.MNEMO_BIN) : resolve(PACKAGE_DIR, '../../.venv/bin/mnemo')
const skip = existsSync(MNEMO) ? false : `mnemo not found at ${MNEMO}; set MNEMO_BIN (or run scripts/bootstrap.sh)`

test('the plugin gives DSH sessions mnemo memory, end to end', { skip, timeout: 180_000 }, async t => {
  const root = mkdtempSync(join(tmpdir(), 'dsh-mnemo-e2e-'))
  const home = join(root, 'home')
  const repo = join(home, 'src', 'repo')
  const plain = join(home, 'src', 'plain')
  mkdirSync(plain, { recursive: true })
  mkdirSync(repo, { recursive: true })
  try {
    execFileSync('git', ['init', '-q', repo], { stdio: 'ignore' })
  } catch {
    // No git: mnemo binds a plain directory just the same.
  }
  const dataDir = join(root, 'data')
  const configPath = join(root, 'config', 'config.yaml')
  const restore = setEnv({
    HOME: home,
    MNEMO_DATA_DIR: dataDir,
    MNEMO_CONFIG: configPath,
    MNEMOSYNE_NO_EMBEDDINGS: '1',
    MNEMOSYNE_LLM_ENABLED: 'false',
    XDG_DATA_HOME: join(home, '.local', 'share'),
    XDG_CONFIG_HOME: join(home, '.config'),
    MNEMO_SESSION_ID: undefined,
    MNEMO_BIN: undefined,
  })
  const ctx = new MockCtx()
  t.after(async () => {
    await ctx.dispose()
    restore()
    // mnemo's hook workers store turns in the background after they answer;
    // let them finish before their data dir goes away.
    await waitFor(() => !workersBusy(join(root, 'data')), { timeoutMs: 60_000, intervalMs: 100,
      what: "mnemo's background hook workers" })
    rmSync(root, { recursive: true, force: true })
  })
  // A loaded test machine can be slow to start Python: give hooks room.
  execFileSync(MNEMO, ['config', 'set', 'hooks.deadline_seconds', '20'], { stdio: 'ignore' })
  apply(ctx, { mnemoPath: MNEMO, dataDir, config: configPath, timeoutMs: 60_000, prefetchTimeoutMs: 25_000 })

  const session = ctx.createSession({ cwd: repo })
  const agent = ctx.agentFor(session)
  const call = async (name, args, on = agent) => {
    const result = await ctx.tools.call(name, args, { agent: on })
    assert.equal(result.isError, false, `${name}: ${textOf(result.content)}`)
    return result
  }
  const recall = async query => (await call('mnemosyne_recall', { query, top_k: 10 })).value.results

  await t.test('bind the repository through the tool', async () => {
    const bound = await call('mnemosyne_bind', {})
    assert.equal(bound.value.status, 'bound')
    assert.equal(bound.value.root, repo)
    assert.ok(existsSync(join(repo, '.mnemosyne-id')), 'the marker was written')
    assert.match(textOf(bound.content), /^Bound /)
    const again = await call('mnemosyne_bind', {})
    assert.equal(again.value.status, 'already-bound')
  })

  let id
  await t.test('remember and recall through the tools', async () => {
    const stored = await call('mnemosyne_remember', { content: 'We deploy with make release, never by hand.' })
    id = stored.value.id
    assert.match(id, /^[0-9a-f]{16}$/)
    assert.equal(stored.value.level, 'workspace')
    const results = await recall('how do we deploy')
    const found = results.find(m => m.id === id)
    assert.ok(found, 'the memory is recalled')
    assert.equal(found.content, 'We deploy with make release, never by hand.')
    assert.equal(found.level, 'workspace')
    assert.ok(found.score > 0)
  })

  await t.test('a pre-step injects the memory block for a related prompt', async () => {
    const decision = await ctx.step(agent, { turn: 1, step: 1, messages: [userMessage('How do we deploy to production?')] })
    assert.equal(decision.messages.length, 2)
    const injected = decision.messages[1]
    assert.deepEqual(injected.source, { kind: 'plugin', plugin: 'mnemo', form: 'recall' })
    const text = textOf(injected.content)
    assert.match(text, /^<memory-data source="mnemo" workspace="repo">/)
    assert.match(text, /make release/)
    assert.match(text, /<\/memory-data>$/)
    session.append('turn/end', { turn: 1, reason: { kind: 'completed' } })
  })

  await t.test('a turn is captured and then recallable', async () => {
    await ctx.turn(agent, { turn: 2, user: 'Note that the staging cluster is called orchid.', reply: 'Noted.' })
    const captured = await waitFor(async () => (await recall('staging cluster orchid'))
      .find(m => m.content.includes('staging cluster is called orchid')), { timeoutMs: 60_000, intervalMs: 250, what: 'the captured turn' })
    assert.match(captured.content, /^\[USER\] Note that the staging cluster is called orchid\.$/)
    const all = await recall('How do we deploy to production')
    assert.ok(all.every(m => !m.content.includes('<memory-data')), 'the injected block was never stored')
  })

  await t.test('stats and sleep report on this workspace', async () => {
    // both captured turns are stored by mnemo's background hook worker
    const stats = await waitFor(async () => {
      const s = await call('mnemosyne_stats', {})
      return s.value.totals.working >= 3 ? s : null
    }, { timeoutMs: 60_000, intervalMs: 250, what: 'the captured turns in the stats' })
    assert.ok(stats.value.totals.working >= 3)
    assert.ok(stats.value.namespaces.some(n => n.level === 'workspace'))
    const sleep = await call('mnemosyne_sleep', { dry_run: true })
    assert.equal(sleep.value.dry_run, true)
  })

  await t.test('forget deletes the memory', async () => {
    const forgot = await call('mnemosyne_forget', { id })
    assert.equal(forgot.value.id, id)
    assert.ok(forgot.value.deleted >= 1)
    assert.ok(!(await recall('how do we deploy')).some(m => m.id === id))
  })

  await t.test('an unbound directory gives the bind hint', async () => {
    const elsewhere = ctx.createSession({ cwd: plain })
    const other = ctx.agentFor(elsewhere)
    const result = await ctx.tools.call('mnemosyne_recall', { query: 'deploy' }, { agent: other })
    assert.equal(result.isError, true)
    const text = textOf(result.content)
    assert.match(text, /not in a bound workspace/)
    assert.match(text, /mnemo bind/)
    assert.match(text, /mnemosyne_bind/)
    const decision = await ctx.step(other, { turn: 1, step: 1, messages: [userMessage('How do we deploy?')] })
    assert.equal(decision.messages.length, 2)
    assert.match(textOf(decision.messages[1].content), /^\[mnemo\] This directory .* has no project memory yet/)
    assert.equal(decision.messages[1].source.form, 'notice')
    assert.ok(!existsSync(join(plain, '.mnemosyne-id')), 'nothing is bound without the tool')
  })

  await t.test('the session ends cleanly', async () => {
    ctx.disposeSession(session)
    await ctx.dispose()
    const log = join(dataDir, 'logs', 'hook.log')
    const errors = existsSync(log)
      ? readFileSync(log, 'utf8').split('\n').filter(line => /^\S+Z error /.test(line))
      : []
    assert.deepEqual(errors, [], `mnemo's hook log (${log}) has no errors`)
  })
})
