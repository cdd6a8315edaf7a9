// Config: a Standard Schema validator with defaults; settings from the environment.

import assert from 'node:assert/strict'
import test from 'node:test'

import { childEnv, Config, resolveSettings } from '../src/config.js'

const validate = value => Config['~standard'].validate(value)

test('no config means every default', () => {
  for (const empty of [undefined, null, {}]) {
    assert.deepEqual(validate(empty), {
      value: { autoPrefetch: true, autoCapture: true, timeoutMs: 15000, prefetchTimeoutMs: 2500 },
    })
  }
})

test('given keys override the defaults; null means the default', () => {
  const { value } = validate({
    mnemoPath: '/opt/mnemo/bin/mnemo', autoPrefetch: false, autoCapture: false, timeoutMs: 5000,
    prefetchTimeoutMs: 800, dataDir: '/data/mnemo', config: '/etc/mnemo.yaml',
  })
  assert.deepEqual(value, {
    mnemoPath: '/opt/mnemo/bin/mnemo', autoPrefetch: false, autoCapture: false, timeoutMs: 5000,
    prefetchTimeoutMs: 800, dataDir: '/data/mnemo', config: '/etc/mnemo.yaml',
  })
  assert.equal(validate({ timeoutMs: null }).value.timeoutMs, 15000)
})

test('bad values and unknown keys are issues that name the key', () => {
  const cases = [
    [{ autoPrefetch: 'yes' }, 'autoPrefetch'],
    [{ timeoutMs: 0 }, 'timeoutMs'],
    [{ timeoutMs: 2.5 }, 'timeoutMs'],
    [{ prefetchTimeoutMs: -1 }, 'prefetchTimeoutMs'],
    [{ mnemoPath: '' }, 'mnemoPath'],
    [{ dataDir: 3 }, 'dataDir'],
    [{ cli: 'mnemosyne' }, 'cli'],
  ]
  for (const [input, key] of cases) {
    const { issues } = validate(input)
    assert.ok(issues?.length === 1, `${JSON.stringify(input)} gives one issue`)
    assert.deepEqual(issues[0].path, [key])
    assert.match(issues[0].message, new RegExp(key))
  }
  assert.ok(validate('mnemo').issues)
  assert.ok(validate([]).issues)
})

test('mnemoPath defaults to MNEMO_BIN, then to mnemo on PATH', () => {
  assert.equal(resolveSettings({}, { MNEMO_BIN: '/x/bin/mnemo' }).mnemoPath, '/x/bin/mnemo')
  assert.equal(resolveSettings({}, {}).mnemoPath, 'mnemo')
  assert.equal(resolveSettings({}, { MNEMO_BIN: '  ' }).mnemoPath, 'mnemo')
  assert.equal(resolveSettings({ mnemoPath: '/y/mnemo' }, { MNEMO_BIN: '/x/bin/mnemo' }).mnemoPath, '/y/mnemo')
  assert.throws(() => resolveSettings({ timeoutMs: 'soon' }), /timeoutMs/)
})

test('dataDir and config become MNEMO_DATA_DIR and MNEMO_CONFIG for mnemo', () => {
  const base = { PATH: '/bin', MNEMO_DATA_DIR: '/inherited' }
  assert.deepEqual(childEnv(resolveSettings({}, {}), base), base)
  assert.deepEqual(childEnv(resolveSettings({ dataDir: '/d', config: '/c.yaml' }, {}), base),
    { PATH: '/bin', MNEMO_DATA_DIR: '/d', MNEMO_CONFIG: '/c.yaml' })
})
