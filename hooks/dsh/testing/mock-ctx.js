/**
 * A mock Cordis `ctx` following the parts of the DSH extension API the
 * plugin uses, with the contracts the real services enforce:
 *
 * - `ctx.tools.register(definition)`: `output { schema, render }` is
 *   mandatory, the output schema must be in the enforced JSON Schema subset,
 *   names are unique; returns a disposer.  `tools.call()` runs a tool the
 *   way the registry does: throws become `isError` results with the error's
 *   message as text, a value must match `output.schema`, `render` makes the
 *   content.
 * - `ctx.skills.register(skill)`: kebab-case name, non-empty description,
 *   string `source` and `content`; returns a disposer.
 * - events: `ctx.on(name, listener, { prepend })`, `emit`, and the
 *   `agent/pre-step` waterfall (`(payload, next) => decision`).
 * - `ctx.get(name)`, `ctx.inject(deps, callback)`, `ctx.effect(fn)`,
 *   `ctx.logger`.
 * - sessions (`id`, `header` with `cwd`, `createdAt`, `parentSession`,
 *   `origin`) whose `append(type, data)` emits `session/event`, a session
 *   store (`ctx.sessions.get(id)`), and agents (`{ session }`).
 */

import { randomUUID } from 'node:crypto'
import { schemaProblems, validate } from '../src/schema.js'

const SKILL_NAME = /^[a-z0-9]+(?:-[a-z0-9]+)*$/

export function userMessage(text, source = { kind: 'user' }) {
  return Object.freeze({ id: randomUUID(), role: 'user', content: [{ type: 'text', text }], source })
}

export function assistantMessage(text) {
  return Object.freeze({
    id: randomUUID(), role: 'assistant', content: [{ type: 'text', text }],
    source: { kind: 'model', provider: 'mock', model: 'mock' },
  })
}

class MockTools {
  constructor() { this.tools = new Map() }

  register(definition) {
    const output = definition?.output
    if (!output || typeof output !== 'object' || typeof output.render !== 'function') {
      throw new TypeError(`tool "${definition?.name}" must declare output { schema, render, presentationMeta? }`)
    }
    const problems = schemaProblems(output.schema)
    if (problems.length > 0) throw new Error(`tool "${definition.name}": unsupported JSON schema: ${problems.join('; ')}`)
    if (typeof definition.execute !== 'function') throw new TypeError(`tool "${definition.name}" has no execute`)
    if (this.tools.has(definition.name)) throw new Error(`tool "${definition.name}" is already registered`)
    this.tools.set(definition.name, definition)
    return () => { this.tools.delete(definition.name) }
  }

  names() { return [...this.tools.keys()] }

  get(name) { return this.tools.get(name) }

  /** Run one call as the registry does; `{ isError, content, value?, error? }`. */
  async call(name, args, exec = {}) {
    const tool = this.tools.get(name)
    if (!tool) throw new Error(`no tool ${name}`)
    const run = { signal: new AbortController().signal, ...exec }
    let value
    try {
      value = await tool.execute(structuredClone(args), run)
    } catch (error) {
      return { isError: true, content: [{ type: 'text', text: error instanceof Error ? error.message : String(error) }], error }
    }
    const problems = validate(tool.output.schema, value)
    if (problems.length > 0) {
      return { isError: true, content: [{ type: 'text', text: `invalid output: ${problems.join('; ')}` }], value }
    }
    const frozen = structuredClone(value)
    return { isError: false, value: frozen, content: tool.output.render(args, frozen) }
  }
}

class MockSkills {
  constructor() { this.skills = new Map() }

  register(skill) {
    if (!SKILL_NAME.test(skill.name)) throw new Error(`invalid skill name "${skill.name}"`)
    if (typeof skill.description !== 'string' || skill.description.length === 0) {
      throw new Error(`skill "${skill.name}" requires a description`)
    }
    if (typeof skill.source !== 'string') throw new TypeError(`skill "${skill.name}" source must be a string`)
    if (typeof skill.content !== 'string') throw new TypeError(`skill "${skill.name}" content must be a string`)
    if (skill.whenToUse !== undefined && typeof skill.whenToUse !== 'string') throw new TypeError('whenToUse must be a string')
    if (this.skills.has(skill.name)) return () => {}
    this.skills.set(skill.name, { ...skill, invocation: skill.invocation ?? { modelInvocable: true, userInvocable: true } })
    return () => { this.skills.delete(skill.name) }
  }
}

export class MockSession {
  constructor(ctx, { id = `session-${randomUUID()}`, cwd, parentSession, origin, createdAt = Date.now() } = {}) {
    this.ctx = ctx
    this.id = id
    this.header = Object.freeze({
      version: 1, id, createdAt,
      ...(cwd !== undefined ? { cwd } : {}),
      ...(parentSession !== undefined ? { parentSession } : {}),
      ...(origin !== undefined ? { origin } : {}),
    })
    this.events = []
  }

  append(type, data) {
    const event = Object.freeze({ type, seq: this.events.length, time: Date.now(), data })
    this.events.push(event)
    this.ctx.emit('session/event', this, event)
    return event
  }
}

export class MockCtx {
  /**
   * @param {object} [options]
   * @param {boolean} [options.skills] - provide a skill registry (default true).
   * @param {boolean} [options.sessions] - provide a session store (default true).
   * @param {boolean} [options.logger] - provide a logger (default true).
   */
  constructor({ skills = true, sessions = true, logger = true } = {}) {
    this.listeners = new Map()
    this.disposers = []
    this.logs = []
    this.tools = new MockTools()
    this.services = { tools: this.tools }
    if (skills) this.services.skills = new MockSkills()
    if (sessions) {
      this.store = new Map()
      this.services.sessions = { get: id => this.store.get(id), list: () => [...this.store.values()] }
    }
    if (logger) {
      const write = type => (format, ...args) => {
        this.logs.push({ type, text: format === '%s' ? String(args[0]) : [format, ...args].join(' ') })
      }
      this.logger = { warn: write('warn'), info: write('info'), error: write('error'), debug: write('debug') }
    }
  }

  get skills() { return this.services.skills }

  get(name) { return this.services[name] }

  inject(deps, callback) {
    if (deps.every(dep => this.services[dep] !== undefined)) callback(this)
  }

  effect(execute) {
    const dispose = execute()
    if (typeof dispose === 'function') this.disposers.push(dispose)
    return dispose
  }

  on(name, listener, options) {
    const prepend = options === true || options?.prepend === true
    const list = this.listeners.get(name) ?? []
    if (prepend) list.unshift(listener)
    else list.push(listener)
    this.listeners.set(name, list)
    const dispose = () => {
      const current = this.listeners.get(name) ?? []
      this.listeners.set(name, current.filter(l => l !== listener))
    }
    this.disposers.push(dispose)
    return dispose
  }

  listenerCount(name) { return (this.listeners.get(name) ?? []).length }

  emit(name, ...args) {
    for (const listener of [...this.listeners.get(name) ?? []]) listener(...args)
  }

  /** Cordis waterfall: each listener gets `(payload, next)`; `last` ends the chain. */
  waterfall(name, payload, last) {
    const list = [...this.listeners.get(name) ?? []]
    const run = index => (index < list.length ? list[index](payload, () => run(index + 1)) : last())
    return run(0)
  }

  /** Unload the plugin: run every effect disposer (awaiting async ones). */
  async dispose() {
    for (const dispose of this.disposers.reverse()) await dispose()
    this.disposers = []
  }

  createSession(options = {}) {
    const session = new MockSession(this, options)
    this.store?.set(session.id, session)
    return session
  }

  disposeSession(session) {
    this.store?.delete(session.id)
    this.emit('session/disposed', session)
  }

  agentFor(session) {
    return { id: `agent-${session.id}`, session }
  }

  /**
   * One proposed step, as the agent loop runs it: the `agent/pre-step`
   * waterfall over the claimed messages (the default decision enters them),
   * then a `user/message` event per entering message.
   */
  async step(agent, { turn, step, messages = [], signal = new AbortController().signal }) {
    const decision = await this.waterfall('agent/pre-step', { agent, messages, turn, step, signal },
      () => Promise.resolve({ kind: 'enter', messages }))
    if (decision.kind === 'enter') {
      agent.session.append('step/start', { turn, step })
      for (const message of decision.messages) agent.session.append('user/message', message)
    }
    return decision
  }

  /** A whole turn: turn/start, one step with the user's text, the reply, turn/end. */
  async turn(agent, { turn, user, reply = 'ok' }) {
    agent.session.append('turn/start', { turn })
    const decision = await this.step(agent, { turn, step: 1, messages: [userMessage(user)] })
    agent.session.append('assistant/message', { turn, step: 1, message: assistantMessage(reply) })
    agent.session.append('step/end', { turn, step: 1 })
    agent.session.append('turn/end', { turn, reason: { kind: 'completed' } })
    return decision
  }
}
