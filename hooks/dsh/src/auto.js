/**
 * Automatic memory through mnemo's generic hook protocol
 * (`mnemo hook prompt|turn-end|session-end --harness generic`, JSON on stdin).
 *
 * - `agent/pre-step` (waterfall): on the first step of each user turn whose
 *   entering messages hold text the user typed (`source.kind === 'user'`),
 *   run `hook prompt` with `{cwd, session_id, prompt}` and append what it
 *   prints (a `<memory-data>` block or the one-line bind hint) as a
 *   plugin-sourced user message.  The call starts before `next()` and is
 *   killed at `prefetchTimeoutMs` from the start of the listener, so it never
 *   holds the step longer than that; any failure means no injection and one
 *   log line.
 * - `session/event`: `user/message` events the user typed are recorded for
 *   the session (plugin-sourced ones, this plugin's block included, never
 *   are); `assistant/message` keeps the turn's last reply text; `turn/end`
 *   sends `{cwd, session_id, user, assistant}` to `hook turn-end`.
 * - `session/disposed`: sends a turn still open, then `hook session-end`
 *   (root sessions only: a subagent or fork shares its root's session id).
 *
 * Subagent sessions (`header.origin === 'subagent'`) are left alone: their
 * "user" messages are another model's instructions, not the user's words.
 */

import { randomUUID } from 'node:crypto'
import { statSync } from 'node:fs'
import { runMnemo } from './run.js'
import { describeSession, isUserSourced, messageText, stripMnemo } from './session.js'

const HOOK = ['hook']
const GENERIC = ['--harness', 'generic']
const HINT_PREFIX = '[mnemo]'

function isDirectory(path) {
  try { return statSync(path).isDirectory() } catch { return false }
}

function freeze(value) {
  if (value && typeof value === 'object') {
    for (const item of Object.values(value)) freeze(item)
    Object.freeze(value)
  }
  return value
}

/**
 * The message appended to the step: a user-role message with a
 * plugin source, the shape `createUserMessage` of `@deepseek-ai/dsh-llm`
 * builds (fresh id, frozen).
 */
export function memoryMessage(plugin, text) {
  const source = text.startsWith(HINT_PREFIX)
    ? { kind: 'plugin', plugin, form: 'notice', summary: 'mnemo: this repository has no project memory yet' }
    : { kind: 'plugin', plugin, form: 'recall' }
  return freeze({ id: randomUUID(), role: 'user', content: [{ type: 'text', text }], source })
}

/**
 * @param {object} deps
 * @param {object} deps.settings - resolved settings.
 * @param {() => NodeJS.ProcessEnv} deps.env - the child environment.
 * @param {() => object | undefined} deps.sessions - `ctx.sessions`, if available.
 * @param {(message: string) => void} deps.log - one line to the host logger.
 * @param {string} deps.plugin - the plugin name used as the message source.
 */
export function createAutoMemory({ settings, env, sessions, log, plugin }) {
  /** Session → the turn whose prefetch already ran. */
  const prefetched = new WeakMap()
  /** Session → capture state of its open turn. */
  const open = new Map()
  /** Capture calls not finished yet. */
  const inflight = new Set()
  /** Prefetch calls under way (aborted on unload). */
  const prefetches = new Set()

  function stateOf(session) {
    let state = open.get(session)
    if (!state) {
      state = { user: [], assistant: '', queue: Promise.resolve() }
      open.set(session, state)
    }
    return state
  }

  function hook(event, cwd, payload, { timeoutMs, signal } = {}) {
    return runMnemo(settings.mnemoPath, [...HOOK, event, ...GENERIC], {
      cwd,
      env: env(),
      input: JSON.stringify(payload),
      timeoutMs: timeoutMs ?? settings.timeoutMs,
      signal,
    })
  }

  // ─── Prefetch ──────────────────────────────────────────────────────────

  function startPrefetch(payload) {
    const session = payload?.agent?.session
    if (!session || payload.signal?.aborted) return null
    const turn = payload.turn
    if (prefetched.get(session) === turn) return null
    const text = (Array.isArray(payload.messages) ? payload.messages : [])
      .filter(isUserSourced)
      .map(message => stripMnemo(messageText(message)))
      .filter(Boolean)
      .join('\n\n')
    if (!text) return null
    const where = describeSession(session, sessions())
    if (where.subagent || !where.cwd) return null
    prefetched.set(session, turn)
    if (!isDirectory(where.cwd)) {
      log(`mnemo prefetch skipped: the session directory ${where.cwd} does not exist`)
      return null
    }
    if (settings.autoCapture) stateOf(session).touched = true // the prompt hook spools the turn
    const controller = new AbortController()
    prefetches.add(controller)
    const outer = payload.signal
    const onAbort = () => controller.abort()
    outer?.addEventListener?.('abort', onAbort, { once: true })
    const promise = hook('prompt', where.cwd, { cwd: where.cwd, session_id: where.sessionId, prompt: text }, {
      timeoutMs: settings.prefetchTimeoutMs, signal: controller.signal,
    }).then(result => {
      const out = result.stdout.trim()
      if (result.code !== 0) {
        log(`mnemo prefetch: hook prompt exited with ${result.code ?? result.signal}; no memory injected`)
        return null
      }
      return out ? memoryMessage(plugin, out) : null
    }, error => {
      if (error?.kind !== 'aborted') log(`mnemo prefetch failed, no memory injected: ${error?.message ?? error}`)
      return null
    }).finally(() => {
      outer?.removeEventListener?.('abort', onAbort)
      prefetches.delete(controller)
    })
    return { promise, cancel: () => controller.abort() }
  }

  /** The `agent/pre-step` listener (register with `{ prepend: true }`). */
  async function preStep(payload, next) {
    let pending = null
    try {
      pending = startPrefetch(payload)
    } catch (error) {
      log(`mnemo prefetch failed, no memory injected: ${error?.message ?? error}`)
    }
    let decision
    try {
      decision = await next()
    } catch (error) {
      pending?.cancel()
      throw error
    }
    if (!pending) return decision
    if (!decision || decision.kind !== 'enter' || !Array.isArray(decision.messages) || payload.signal?.aborted) {
      pending.cancel()
      return decision
    }
    const message = await pending.promise
    if (!message || payload.signal?.aborted) return decision
    return { ...decision, messages: [...decision.messages, message] }
  }

  // ─── Capture ───────────────────────────────────────────────────────────

  function enqueue(state, work) {
    const queued = state.queue.then(work).catch(error => {
      log(`mnemo capture failed: ${error?.message ?? error}`)
    })
    state.queue = queued
    inflight.add(queued)
    queued.finally(() => inflight.delete(queued))
    return queued
  }

  function send(event, session, extra) {
    const where = describeSession(session, sessions())
    if (!where.cwd) return Promise.resolve()
    return hook(event, where.cwd, { cwd: where.cwd, session_id: where.sessionId, ...extra }).then(result => {
      if (result.code !== 0) log(`mnemo hook ${event} exited with ${result.code ?? result.signal}`)
    })
  }

  function flushTurn(session, state) {
    if (state.user.length === 0) return
    const turn = { user: state.user.join('\n\n'), assistant: state.assistant }
    state.user = []
    state.assistant = ''
    enqueue(state, () => send('turn-end', session, turn))
  }

  /** The `session/event` listener: `(session, event)`. */
  function onSessionEvent(session, event) {
    try {
      if (!session || !event) return
      if (event.type === 'user/message') {
        if (!isUserSourced(event.data)) return
        const text = stripMnemo(messageText(event.data))
        if (!text || session.header?.origin === 'subagent') return
        const state = stateOf(session)
        state.user.push(text)
        state.touched = true
      } else if (event.type === 'assistant/message') {
        const state = open.get(session)
        if (!state || state.user.length === 0) return
        const reply = messageText(event.data?.message).trim()
        if (reply) state.assistant = reply
      } else if (event.type === 'turn/end') {
        const state = open.get(session)
        if (state) flushTurn(session, state)
      }
    } catch (error) {
      log(`mnemo capture failed: ${error?.message ?? error}`)
    }
  }

  /** The `session/disposed` listener: `(session)`. */
  function onSessionDisposed(session) {
    try {
      const state = open.get(session)
      open.delete(session)
      if (!state || !state.touched) return
      flushTurn(session, state)
      if (!session.header?.parentSession) enqueue(state, () => send('session-end', session, {}))
    } catch (error) {
      log(`mnemo session end failed: ${error?.message ?? error}`)
    }
  }

  /**
   * Plugin unload: abandon prefetches, store the turns still open (no reply
   * yet), then wait for every capture call.
   */
  async function close() {
    for (const controller of prefetches) controller.abort()
    if (settings.autoCapture) {
      for (const [session, state] of open) {
        try { flushTurn(session, state) } catch { /* logged by the queue */ }
      }
    }
    open.clear()
    await idle()
  }

  /** Resolves once every queued capture call has finished. */
  async function idle() {
    while (inflight.size > 0) await Promise.all([...inflight])
  }

  return { preStep, onSessionEvent, onSessionDisposed, idle, close }
}
