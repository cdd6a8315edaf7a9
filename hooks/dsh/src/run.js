/**
 * Running mnemo: one child process per call, never through a shell.
 *
 * `runMnemo` spawns the executable with an argument vector, writes `input`
 * to its stdin, and settles on exit, on its timeout, or when `signal`
 * aborts.  On timeout or abort it settles at once (the caller is never held
 * up by a slow child) and stops the child: SIGTERM, then SIGKILL if it is
 * still there a second later.  mnemo is built to be stopped like that: its
 * writes are SQLite transactions and a hook's claimed turn is picked up again
 * later.
 */

import { spawn } from 'node:child_process'
import { statSync } from 'node:fs'

export const INSTALL_HINT = 'Install mnemo with `pipx install dsh-mnemo` (or `uv tool install dsh-mnemo`), '
  + 'or set the plugin\'s `mnemoPath` (or the MNEMO_BIN environment variable) to the mnemo executable, '
  + 'then restart the DSH profile.'

export const BIND_TOOL_HINT = 'This directory has no project memory yet. Ask the user whether to bind this '
  + 'repository; if they agree, call mnemosyne_bind (it writes a .mnemosyne-id marker in the repository root).'

/** mnemo's exit codes that callers treat specially (docs/exit-codes.md). */
export const EXIT_UNBOUND = 4

const MAX_OUTPUT = 8 * 1024 * 1024
const KILL_GRACE_MS = 1000

/** A mnemo call that failed; `message` is what a model or a log should see. */
export class MnemoError extends Error {
  /**
   * @param {string} reason - what went wrong.
   * @param {object} [details]
   * @param {string | null} [details.hint] - what to do about it.
   * @param {'missing'|'timeout'|'aborted'|'failed'|'unbound'|'output'|'cwd'} [details.kind]
   * @param {number | null} [details.exitCode]
   */
  constructor(reason, { hint = null, kind = 'failed', exitCode = null } = {}) {
    super(hint ? `${reason}\n${hint}` : reason)
    this.name = 'MnemoError'
    this.reason = reason
    this.hint = hint
    this.kind = kind
    this.exitCode = exitCode
  }
}

function stop(child) {
  if (child.exitCode !== null || child.signalCode !== null) return
  try { child.kill('SIGTERM') } catch { /* already gone */ }
  const timer = setTimeout(() => {
    if (child.exitCode === null && child.signalCode === null) {
      try { child.kill('SIGKILL') } catch { /* already gone */ }
    }
  }, KILL_GRACE_MS)
  timer.unref?.()
}

/** A spawn failure as a MnemoError (ENOENT/EACCES: the install hint). */
function spawnError(bin, error) {
  if (error && (error.code === 'ENOENT' || error.code === 'EACCES' || error.code === 'ENOTDIR')) {
    const what = error.code === 'EACCES' ? 'is not executable' : 'was not found'
    return new MnemoError(`mnemo ${what} (tried ${JSON.stringify(bin)}).`, { hint: INSTALL_HINT, kind: 'missing' })
  }
  return new MnemoError(`mnemo could not be started (${JSON.stringify(bin)}): ${error?.message ?? error}`, {
    hint: INSTALL_HINT, kind: 'missing',
  })
}

/**
 * Check that `cwd` is an existing directory (spawn would report a missing
 * one as ENOENT, indistinguishable from a missing executable).
 */
export function assertDirectory(cwd) {
  let stat
  try { stat = statSync(cwd) } catch { stat = null }
  if (!stat || !stat.isDirectory()) {
    throw new MnemoError(`the session's working directory ${JSON.stringify(cwd)} does not exist`, { kind: 'cwd' })
  }
}

/**
 * Run mnemo once.
 * @param {string} bin - the executable.
 * @param {string[]} args - its arguments.
 * @param {object} options
 * @param {string} options.cwd - the directory it runs in (mnemo resolves the workspace from it).
 * @param {NodeJS.ProcessEnv} options.env - its environment.
 * @param {string} [options.input] - written to its stdin (which is then closed).
 * @param {number} options.timeoutMs - give up (and stop the child) after this long.
 * @param {AbortSignal} [options.signal] - give up (and stop the child) when aborted.
 * @returns {Promise<{ code: number | null, signal: string | null, stdout: string, stderr: string }>}
 */
export function runMnemo(bin, args, { cwd, env, input, timeoutMs, signal }) {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(new MnemoError('mnemo call cancelled', { kind: 'aborted' }))
      return
    }
    let child
    try {
      child = spawn(bin, args, { cwd, env, stdio: ['pipe', 'pipe', 'pipe'], windowsHide: true })
    } catch (error) {
      reject(spawnError(bin, error))
      return
    }
    let settled = false
    const out = []
    const err = []
    let outBytes = 0
    let errBytes = 0
    const timer = setTimeout(() => {
      const what = args[0] === 'hook' ? `hook ${args[1]}` : args[0]
      finish(() => reject(new MnemoError(`mnemo ${what} did not answer within ${timeoutMs} ms`, { kind: 'timeout' })))
      stop(child)
    }, timeoutMs)
    const onAbort = () => {
      finish(() => reject(new MnemoError('mnemo call cancelled', { kind: 'aborted' })))
      stop(child)
    }
    signal?.addEventListener('abort', onAbort, { once: true })

    function finish(settle) {
      if (settled) return
      settled = true
      clearTimeout(timer)
      signal?.removeEventListener('abort', onAbort)
      settle()
    }

    child.on('error', error => {
      finish(() => reject(spawnError(bin, error)))
    })
    child.stdout.on('data', chunk => {
      if (outBytes < MAX_OUTPUT) out.push(chunk)
      outBytes += chunk.length
    })
    child.stderr.on('data', chunk => {
      if (errBytes < MAX_OUTPUT) err.push(chunk)
      errBytes += chunk.length
    })
    child.on('close', (code, exitSignal) => {
      finish(() => resolve({
        code,
        signal: exitSignal,
        stdout: Buffer.concat(out).toString('utf8'),
        stderr: Buffer.concat(err).toString('utf8'),
      }))
    })
    child.stdin.on('error', () => { /* the child exited without reading its stdin */ })
    child.stdin.end(input ?? '')
  })
}

/** The one JSON document mnemo printed, or null. */
export function parseDocument(stdout) {
  const text = stdout.trim()
  if (!text.startsWith('{')) return null
  try {
    const doc = JSON.parse(text)
    return doc !== null && typeof doc === 'object' && !Array.isArray(doc) ? doc : null
  } catch {
    return null
  }
}

function lastLines(text, limit = 1200) {
  const trimmed = text.trim()
  return trimmed.length <= limit ? trimmed : `…${trimmed.slice(-limit)}`
}

/**
 * Run `mnemo ARGS --json` and return its document of `kind`.
 *
 * Failures become MnemoError: mnemo's JSON error envelope
 * (`{"kind": "error", "error", "hint", "exit_code"}`) keeps its message and
 * hint; a non-zero exit without one uses stderr.  An unbound directory (exit
 * 4) also gets the tool-side bind hint.
 */
export async function mnemoJson(settings, args, { cwd, env, kind, signal, input }) {
  const result = await runMnemo(settings.mnemoPath, [...args, '--json'], {
    cwd, env, input, timeoutMs: settings.timeoutMs, signal,
  })
  const doc = parseDocument(result.stdout)
  if (doc && doc.kind === 'error') {
    const exitCode = Number.isInteger(doc.exit_code) ? doc.exit_code : result.code
    const unbound = exitCode === EXIT_UNBOUND
    const hints = [typeof doc.hint === 'string' && doc.hint.trim() ? doc.hint.trim() : null,
      unbound ? BIND_TOOL_HINT : null].filter(Boolean)
    throw new MnemoError(`mnemo: ${doc.error ?? 'failed'}`, {
      hint: hints.length > 0 ? hints.join('\n') : null,
      kind: unbound ? 'unbound' : 'failed',
      exitCode,
    })
  }
  if (doc && doc.kind === kind && result.code === 0) return doc
  if (result.code !== 0) {
    const unbound = result.code === EXIT_UNBOUND
    const stderr = lastLines(result.stderr)
    const reason = stderr
      ? (stderr.startsWith('mnemo') ? stderr : `mnemo: ${stderr}`)
      : `mnemo ${args[0]} failed (exit ${result.code ?? result.signal})`
    throw new MnemoError(reason, {
      hint: unbound ? BIND_TOOL_HINT : null,
      kind: unbound ? 'unbound' : 'failed',
      exitCode: result.code,
    })
  }
  throw new MnemoError(`mnemo ${args[0]} printed no "${kind}" JSON document; is ${JSON.stringify(settings.mnemoPath)} mnemo?`, {
    kind: 'output',
  })
}
