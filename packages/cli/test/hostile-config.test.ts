/**
 * `ratewindow` under the attacks of issue 45's core round on its override flags, against a real redis-server.
 */
import { join } from 'node:path'
import { fixedWindow, RateLimiter, RedisStore } from '@ratewindow/core'
import { describe, expect, it } from 'vitest'
import { redisEnvironment, standaloneClient } from '../../../test/support/redis.js'
import { uniquePrefix } from '../../../test/support/redis-store-suite.js'
import { run } from '../src/index.js'

const redis = () => ['--redis', `redis://127.0.0.1:${redisEnvironment().standalonePort}`]

/** `run` in this process (the override flags need no process of their own). */
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
