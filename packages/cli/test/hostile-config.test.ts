/**
 * `ratewindow` under the attacks of issue 45's core round on its config loading and override flags, run as a user
 * runs it (`node dist/bin.js`), against a real redis-server.
 */
import { join } from 'node:path'
import { fixedWindow, RateLimiter, RedisStore } from '@ratewindow/core'
import { beforeAll, describe, expect, it } from 'vitest'
import { redisEnvironment, standaloneClient } from '../../../test/support/redis.js'
import { uniquePrefix } from '../../../test/support/redis-store-suite.js'
import { parseCommandLine } from '../src/args.js'
import { run } from '../src/index.js'
import { CONFIG, ensureBuilt, ratewindow } from './support.js'

beforeAll(ensureBuilt, 120_000)

const NEVER_LOADS = join(import.meta.dirname, 'fixtures/never-loads.mjs')
const redis = () => ['--redis', `redis://127.0.0.1:${redisEnvironment().standalonePort}`]

/** `run` in this process (the command line's parse and the override flags need no process of their own). */
async function inProcess(argv: readonly string[], env: Record<string, string> = {}) {
  const stdout: string[] = []
  const stderr: string[] = []
  const code = await run(argv, {
    env,
    stdout: (text) => stdout.push(text),
    stderr: (text) => stderr.push(text),
  })
  return { code, stdout: stdout.join(''), stderr: stderr.join('') }
}

describe('issue 45, item 31: a config module that never finishes loading', () => {
  it('ends with a message naming the file once the bound has passed (it waited silently forever)', async () => {
    // The bound is shortened for the test (--config-timeout, over RATEWINDOW_CONFIG_TIMEOUT); by default 10 s.
    const ran = await ratewindow(
      ['limiters', ...redis(), '--config', NEVER_LOADS, '--config-timeout', '0.3'],
      {
        env: { RATEWINDOW_CONFIG_TIMEOUT: '600' },
        timeout: 4_000,
      },
    )
    expect(ran.code).toBe(1)
    expect(ran.stderr).toContain(`\`--config\` ${NEVER_LOADS} did not finish loading within 0.3 s`)
    expect(ran.stderr).toContain('--config-timeout')
  })

  it('the bound: --config-timeout, else RATEWINDOW_CONFIG_TIMEOUT, else 10 s; in seconds or with a unit', async () => {
    const bound = (args: string[], env: Record<string, string> = {}) =>
      parseCommandLine(['limiters', ...args], env).options.configTimeoutMs
    expect(bound([])).toBe(10_000)
    expect(bound([], { RATEWINDOW_CONFIG_TIMEOUT: '0.5' })).toBe(500)
    expect(bound(['--config-timeout', '30'], { RATEWINDOW_CONFIG_TIMEOUT: '0.5' })).toBe(30_000)
    expect(bound(['--config-timeout', '2m'])).toBe(120_000)
    for (const [args, env, named] of [
      [['--config-timeout', 'soon'], {}, '`--config-timeout`'],
      [[], { RATEWINDOW_CONFIG_TIMEOUT: '0' }, '`RATEWINDOW_CONFIG_TIMEOUT`'],
    ] as const) {
      const { code, stderr } = await inProcess(['limiters', ...redis(), '--config', CONFIG, ...args], env)
      expect([code, stderr]).toEqual([2, expect.stringContaining(`${named} takes seconds`)])
    }
  })
})

describe('issue 45, item 31: `overrides set --rule` with a rule named `__proto__`', () => {
  it('keeps the override (it set the prototype of the rules map, and nothing was kept)', async () => {
    const prefix = uniquePrefix()
    const config = join(import.meta.dirname, 'fixtures/proto-rule.mjs')
    const ran = await inProcess([
      'overrides',
      'set',
      'k',
      '--rule',
      '__proto__=2',
      ...redis(),
      '--prefix',
      prefix,
      '--config',
      config,
    ])
    expect([ran.code, ran.stderr]).toEqual([0, ''])
    // The application's limiter, on the same Redis: the override is enforced.
    const limiter = new RateLimiter({
      rules: fixedWindow({ limit: 100, window: '1m', name: '__proto__' }),
      store: new RedisStore({ client: standaloneClient(), prefix }),
      name: 'proto',
      overrides: true,
    })
    let admitted = 0
    for (let i = 0; i < 5; i++) if ((await limiter.limit('k')).allowed) admitted++
    expect(admitted).toBe(2)
  })
})
