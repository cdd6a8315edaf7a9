/**
 * What mnemo needs from a DSH session: the directory (`header.cwd`, the
 * absolute working directory the session was created in) and a session id
 * derived from the ROOT session, so a subagent or a fork shares its root
 * conversation's session memory.
 */

const COUNTER_ID = /^session-\d+$/

/**
 * The root of `session`'s lineage: follow `header.parentSession` through the
 * session store while the parent is live; an unloaded parent ends the walk
 * with only its id known.
 * @param {object} session - a DSH Session (`id`, `header`).
 * @param {{ get(id: string): object | undefined } | undefined} sessions - `ctx.sessions`, if available.
 * @returns {{ id: string, header: object | undefined }}
 */
export function rootSession(session, sessions) {
  let current = session
  const seen = new Set()
  while (current?.header?.parentSession && !seen.has(current.id)) {
    seen.add(current.id)
    const parentId = current.header.parentSession
    let parent
    try { parent = sessions?.get?.(parentId) } catch { parent = undefined }
    if (!parent) return { id: String(parentId), header: undefined }
    current = parent
  }
  return { id: String(current.id ?? current.header?.id), header: current.header }
}

/**
 * The session id given to mnemo: `dsh_<root id>`, plus `_<createdAt>` for
 * counter-style ids (`session-3`), which a later DSH process can reuse for a
 * different conversation.  This is the derivation the earlier DSH plugin
 * used, so session-scoped memories written by it stay visible.
 */
export function mnemoSessionId(root) {
  const id = String(root.id)
  const createdAt = root.header?.createdAt
  if (COUNTER_ID.test(id) && Number.isSafeInteger(createdAt)) return `dsh_${id}_${createdAt}`
  return `dsh_${id}`
}

/**
 * The directory and session id of a DSH session, or nulls.
 * @returns {{ cwd: string | null, sessionId: string | null, subagent: boolean }}
 */
export function describeSession(session, sessions) {
  if (!session || typeof session !== 'object') return { cwd: null, sessionId: null, subagent: false }
  const root = rootSession(session, sessions)
  const own = session.header?.cwd
  const cwd = typeof own === 'string' && own ? own : (typeof root.header?.cwd === 'string' && root.header.cwd) || null
  return {
    cwd,
    sessionId: root.id && root.id !== 'undefined' ? mnemoSessionId(root) : null,
    subagent: session.header?.origin === 'subagent',
  }
}

/** The text blocks of a message's content, joined. */
export function messageText(message) {
  const content = message?.content
  if (typeof content === 'string') return content
  if (!Array.isArray(content)) return ''
  return content
    .filter(block => block && block.type === 'text' && typeof block.text === 'string')
    .map(block => block.text)
    .join('\n')
}

/** Is this a message the human typed (not a plugin's, a tool's or the model's)? */
export function isUserSourced(message) {
  return message?.role !== 'assistant' && message?.source?.kind === 'user'
}

const BLOCK = /<memory-data\b[^>]*>[\s\S]*?<\/memory-data>/g
const HINT_LINE = /^\[mnemo\] .*$/gm

/**
 * A user's text without any mnemo block or hint line in it (they never reach
 * DSH's user messages through this plugin, which injects plugin-sourced
 * messages, but a user may paste one back).  mnemo strips them too.
 */
export function stripMnemo(text) {
  return text.replace(BLOCK, '').replace(HINT_LINE, '').trim()
}
