// The package is a DSH bundle: package.json, cordis.patch.yml and the module's exports.

import assert from 'node:assert/strict'
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import test from 'node:test'

import * as plugin from '../index.js'
import { FIELDS } from '../src/config.js'
import { TOOL_NAMES } from '../src/tools.js'
import { PACKAGE_DIR } from '../testing/util.js'

const manifest = JSON.parse(readFileSync(join(PACKAGE_DIR, 'package.json'), 'utf8'))

/**
 * The one row of the patch, read from its fixed layout (no YAML parser: the
 * package has no dependencies).  Returns { id, name, config: {key: text} }.
 */
function patchRow() {
  const lines = readFileSync(join(PACKAGE_DIR, manifest.dsh.bundle.patch), 'utf8')
    .split('\n').filter(line => line.trim() && !line.trim().startsWith('#'))
  assert.equal(lines[0], '- insert:', 'the patch is a list whose first entry inserts rows')
  const row = { config: {} }
  let inConfig = false
  for (const line of lines.slice(1)) {
    const match = /^(\s*)(?:- )?([A-Za-z]+):\s*(.*)$/.exec(line)
    assert.ok(match, `unexpected patch line: ${line}`)
    const [, , key, value] = match
    if (key === 'config') { inConfig = true; continue }
    if (inConfig && line.startsWith('        ')) row.config[key] = value
    else { inConfig = false; row[key] = value }
  }
  return row
}

test('package.json declares a DSH bundle whose patch file exists', () => {
  assert.equal(manifest.type, 'module')
  assert.equal(typeof manifest.dsh?.bundle?.patch, 'string')
  assert.ok(existsSync(join(PACKAGE_DIR, manifest.dsh.bundle.patch)))
  assert.equal(manifest.exports['.'], './index.js')
  assert.equal(manifest.main, './index.js')
  for (const shipped of ['index.js', 'src/', 'cordis.patch.yml', 'README.md']) {
    assert.ok(manifest.files.includes(shipped), `${shipped} is shipped`)
    assert.ok(existsSync(join(PACKAGE_DIR, shipped)), `${shipped} exists`)
  }
})

test('the package has no dependencies of any kind (installs offline)', () => {
  for (const field of ['dependencies', 'peerDependencies', 'optionalDependencies', 'devDependencies', 'bundleDependencies']) {
    assert.equal(manifest[field], undefined, `${field} is absent`)
  }
  const sources = ['index.js', 'src/auto.js', 'src/config.js', 'src/run.js', 'src/schema.js', 'src/session.js', 'src/skill.js', 'src/tools.js']
  for (const file of sources) {
    const text = readFileSync(join(PACKAGE_DIR, file), 'utf8')
    for (const [, specifier] of text.matchAll(/^import .* from '([^']+)'/gm)) {
      assert.ok(specifier.startsWith('node:') || specifier.startsWith('./') || specifier.startsWith('../'),
        `${file} imports only node: builtins and its own files, not ${specifier}`)
    }
  }
})

test('cordis.patch.yml inserts one row naming this package, with valid config', () => {
  const row = patchRow()
  assert.equal(row.id, 'mnemo')
  assert.equal(row.name, manifest.name)
  const config = Object.fromEntries(Object.entries(row.config).map(([key, value]) => [key, JSON.parse(value)]))
  const checked = plugin.Config['~standard'].validate(config)
  assert.deepEqual(checked.issues, undefined)
  assert.equal(checked.value.autoPrefetch, true)
  assert.equal(checked.value.autoCapture, true)
})

test('the module exports name, inject, Config and apply as Cordis expects', () => {
  assert.equal(plugin.name, 'mnemo')
  assert.deepEqual(plugin.inject, ['tools'])
  assert.equal(plugin.Config['~standard'].version, 1)
  assert.equal(typeof plugin.Config['~standard'].validate, 'function')
  assert.equal(typeof plugin.apply, 'function')
})

test('the README documents every config key, tool and event', () => {
  const readme = readFileSync(join(PACKAGE_DIR, 'README.md'), 'utf8')
  for (const key of Object.keys(FIELDS)) assert.ok(readme.includes(`\`${key}\``), `README mentions ${key}`)
  for (const tool of TOOL_NAMES) assert.ok(readme.includes(tool), `README mentions ${tool}`)
  for (const event of ['agent/pre-step', 'user/message', 'turn/end', 'session/disposed']) {
    assert.ok(readme.includes(event), `README mentions ${event}`)
  }
  assert.ok(readme.includes('dsh plugin --profile web add'))
})
