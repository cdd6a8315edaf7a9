/**
 * The plugin's `Config`: a dependency-free Standard Schema (v1) validator.
 *
 * Cordis validates a row's `config` by calling
 * `Config['~standard'].validate(config)` synchronously before `apply` runs and
 * hands `apply` the returned `value` (issues fail the load).  That is all it
 * needs, so this module implements the interface directly instead of
 * importing `@deepseek-ai/schemastery`: the package then installs with no
 * dependencies (no network) and its tests need none.
 */

/** Every key, its type, default and meaning (README.md repeats this table). */
export const FIELDS = Object.freeze({
  mnemoPath: {
    type: 'string',
    doc: 'The mnemo executable. Default: the MNEMO_BIN environment variable, else `mnemo` on PATH.',
  },
  autoPrefetch: {
    type: 'boolean',
    default: true,
    doc: 'Before the first model step of each user turn, inject what `mnemo hook prompt` returns.',
  },
  autoCapture: {
    type: 'boolean',
    default: true,
    doc: 'Store each user turn (and the reply, if mnemo\'s capture.roles says so) at turn end; end the mnemo session when the DSH session is disposed.',
  },
  timeoutMs: {
    type: 'integer',
    default: 15000,
    doc: 'Kill any other mnemo call (tools, capture) after this many milliseconds.',
  },
  prefetchTimeoutMs: {
    type: 'integer',
    default: 2500,
    doc: 'Deadline of the prefetch: past it the step goes on without memory (and one log line).',
  },
  dataDir: {
    type: 'string',
    doc: 'Passed to mnemo as MNEMO_DATA_DIR. Default: mnemo\'s own (or the inherited variable).',
  },
  config: {
    type: 'string',
    doc: 'Passed to mnemo as MNEMO_CONFIG (its settings file). Default: mnemo\'s own.',
  },
})

function describe(value) {
  if (value === null) return 'null'
  if (Array.isArray(value)) return 'an array'
  return typeof value === 'string' ? JSON.stringify(value) : `${typeof value} ${String(value)}`
}

/**
 * Validate and complete a row's config.
 * @param {unknown} input - the row's `config` (absent or null means all defaults).
 * @returns {{ value: object } | { issues: { message: string, path: string[] }[] }}
 */
export function validateConfig(input) {
  const issues = []
  if (input === undefined || input === null) input = {}
  if (typeof input !== 'object' || Array.isArray(input)) {
    return { issues: [{ message: `mnemo: config must be a mapping, got ${describe(input)}`, path: [] }] }
  }
  const value = {}
  for (const key of Object.keys(input)) {
    if (!Object.hasOwn(FIELDS, key)) {
      issues.push({ message: `mnemo: unknown config key "${key}" (known: ${Object.keys(FIELDS).join(', ')})`, path: [key] })
    }
  }
  for (const [key, field] of Object.entries(FIELDS)) {
    const raw = input[key]
    if (raw === undefined || raw === null) {
      if ('default' in field) value[key] = field.default
      continue
    }
    if (field.type === 'boolean') {
      if (typeof raw !== 'boolean') issues.push({ message: `mnemo: ${key} must be true or false, got ${describe(raw)}`, path: [key] })
      else value[key] = raw
    } else if (field.type === 'integer') {
      if (!Number.isSafeInteger(raw) || raw <= 0) {
        issues.push({ message: `mnemo: ${key} must be a positive whole number of milliseconds, got ${describe(raw)}`, path: [key] })
      } else value[key] = raw
    } else if (typeof raw !== 'string' || raw.trim() === '') {
      issues.push({ message: `mnemo: ${key} must be a non-empty string, got ${describe(raw)}`, path: [key] })
    } else value[key] = raw
  }
  return issues.length > 0 ? { issues } : { value: Object.freeze(value) }
}

/** The exported `Config`: what Cordis calls before `apply`. */
export const Config = Object.freeze({
  '~standard': Object.freeze({
    version: 1,
    vendor: 'dsh-mnemo',
    validate: validateConfig,
  }),
})

/**
 * Settings in effect: the validated config plus what comes from the
 * environment (MNEMO_BIN for the executable).  Used when `apply` is called
 * without Cordis having validated the config (tests, other hosts).
 * @param {object | undefined} config - validated (or raw) config.
 * @param {NodeJS.ProcessEnv} env - the environment the host runs in.
 */
export function resolveSettings(config, env = process.env) {
  const checked = validateConfig(config)
  if (checked.issues) throw new TypeError(checked.issues.map(issue => issue.message).join('; '))
  const value = checked.value
  return Object.freeze({
    ...value,
    mnemoPath: value.mnemoPath ?? (env.MNEMO_BIN && env.MNEMO_BIN.trim() ? env.MNEMO_BIN : 'mnemo'),
  })
}

/**
 * The environment of every mnemo child process: the host's, plus
 * MNEMO_DATA_DIR / MNEMO_CONFIG when configured.
 */
export function childEnv(settings, env = process.env) {
  const result = { ...env }
  if (settings.dataDir) result.MNEMO_DATA_DIR = settings.dataDir
  if (settings.config) result.MNEMO_CONFIG = settings.config
  return result
}
