/**
 * dsh-mnemo: the DeepSeek Harness (DSH) plugin of mnemo.
 *
 * A Cordis plugin module (named exports `name`, `inject`, `Config`, `apply`)
 * that gives DSH sessions mnemo's workspace-scoped long-term memory:
 *
 * - six tools (`mnemosyne_remember`, `_recall`, `_forget`, `_stats`,
 *   `_sleep`, `_bind`) that run `mnemo … --json` in the session's directory;
 * - automatic memory through mnemo's generic hook protocol: `agent/pre-step`
 *   injects what `mnemo hook prompt` prints, `session/event` (`user/message`,
 *   `assistant/message`, `turn/end`) captures each turn, `session/disposed`
 *   ends the mnemo session;
 * - a runtime skill (`mnemo-memory`) telling the model how to use them.
 *
 * Only `tools` is a hard dependency; `skills` and `sessions` are used when
 * present.  Nothing is imported from DSH packages: see README.md.
 */

import { childEnv, Config, resolveSettings } from './src/config.js'
import { createAutoMemory } from './src/auto.js'
import { SKILL } from './src/skill.js'
import { createTools } from './src/tools.js'

export { Config }

/** The plugin's name (also the `source.plugin` of the messages it injects). */
export const name = 'mnemo'

/** Hard dependencies: the tool registry. */
export const inject = ['tools']

const REPEAT_LOG_MS = 60_000

/** One line to the host logger (if there is one); the same line at most once a minute. */
function hostLog(ctx) {
  const last = new Map()
  return message => {
    const now = Date.now()
    const before = last.get(message)
    if (before !== undefined && now - before < REPEAT_LOG_MS) return
    if (last.size > 200) last.clear()
    last.set(message, now)
    try {
      const logger = ctx.logger
      if (logger && typeof logger.warn === 'function') logger.warn('%s', message)
    } catch {
      // No logger in this host: failing open means staying quiet.
    }
  }
}

function soft(ctx, service) {
  try {
    return typeof ctx.get === 'function' ? ctx.get(service) : undefined
  } catch {
    return undefined
  }
}

function registerSkill(ctx, log) {
  const register = skills => {
    try {
      skills.register(SKILL)
    } catch (error) {
      log(`mnemo: could not register the ${SKILL.name} skill: ${error?.message ?? error}`)
    }
  }
  if (typeof ctx.inject === 'function') {
    // Runs when (and each time) a skill registry is available; unloaded with it.
    ctx.inject(['skills'], sctx => register(sctx.skills))
  } else {
    const skills = soft(ctx, 'skills')
    if (skills) register(skills)
  }
}

/**
 * Register everything for the lifetime of `ctx`.
 * @param {object} ctx - the plugin's Cordis context.
 * @param {object} config - the row's config, validated by `Config`.
 */
export function apply(ctx, config) {
  const settings = resolveSettings(config)
  const env = () => childEnv(settings)
  const sessions = () => soft(ctx, 'sessions')
  const log = hostLog(ctx)

  for (const tool of createTools({ settings, env, sessions })) ctx.tools.register(tool)
  registerSkill(ctx, log)

  if (!settings.autoPrefetch && !settings.autoCapture) return
  const auto = createAutoMemory({ settings, env, sessions, log, plugin: name })
  if (settings.autoPrefetch) ctx.on('agent/pre-step', auto.preStep, { prepend: true })
  if (settings.autoCapture) {
    ctx.on('session/event', auto.onSessionEvent)
    ctx.on('session/disposed', auto.onSessionDisposed)
  }
  if (typeof ctx.effect === 'function') {
    ctx.effect(() => () => auto.close(), 'mnemo: stop prefetch calls, finish capture calls')
  }
}
