/** Small helpers shared by the tests. */

import { mkdtempSync, readFileSync, rmSync, writeFileSync, existsSync, mkdirSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

export const PACKAGE_DIR = join(dirname(fileURLToPath(import.meta.url)), '..')
export const FAKE_MNEMO = join(PACKAGE_DIR, 'testing', 'fake-mnemo.mjs')

/** Poll `check` until it returns a truthy value (returned), or fail after `timeoutMs`. */
export async function waitFor(check, { timeoutMs = 10_000, intervalMs = 25, what = 'condition' } = {}) {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const value = await check()
    if (value) return value
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise(resolve => setTimeout(resolve, intervalMs))
  }
}

/**
 * A scratch area for one test: a project directory, the fake mnemo's log
 * and scenario files, and `env` to put into process.env for the test.
 */
export function scratch() {
  const root = mkdtempSync(join(tmpdir(), 'dsh-mnemo-test-'))
  const project = join(root, 'project')
  mkdirSync(project)
  const log = join(root, 'calls.jsonl')
  const scenarioPath = join(root, 'scenario.json')
  return {
    root,
    project,
    env: { FAKE_MNEMO_LOG: log, FAKE_MNEMO_SCENARIO: scenarioPath },
    scenario(value) { writeFileSync(scenarioPath, JSON.stringify(value)) },
    calls() {
      if (!existsSync(log)) return []
      return readFileSync(log, 'utf8').split('\n').filter(Boolean).map(line => JSON.parse(line))
    },
    cleanup() { rmSync(root, { recursive: true, force: true }) },
  }
}

/** Set environment variables for the duration of a test; returns the undo. */
export function setEnv(values) {
  const saved = {}
  for (const [key, value] of Object.entries(values)) {
    saved[key] = process.env[key]
    if (value === undefined) delete process.env[key]
    else process.env[key] = value
  }
  return () => {
    for (const [key, value] of Object.entries(saved)) {
      if (value === undefined) delete process.env[key]
      else process.env[key] = value
    }
  }
}

/** The text of a tool result or message content. */
export function textOf(content) {
  return content.filter(block => block.type === 'text').map(block => block.text).join('\n')
}
