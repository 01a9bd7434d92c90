/**
 * What the attack round on the operator tools found in `ratewindow`'s output (issue 45, item 22), each pinned as an
 * operator meets it: the command line run (in this process) against a real Redis, its text read line by line.
 */
import { RateLimiter, RedisStore } from '@ratewindow/core'
import { afterAll, describe, expect, it } from 'vitest'
import { redisEnvironment, standaloneClient } from '../../../test/support/redis.js'
import { uniquePrefix } from '../../../test/support/redis-store-suite.js'
import { run } from '../src/run.js'
import { limiters } from './fixtures/limiters.mjs'
import { CONFIG } from './support.js'

const API = limiters[0] as ConstructorParameters<typeof RateLimiter>[0]
const releasing: RateLimiter[] = []
afterAll(() => {
  for (const limiter of releasing) limiter.release()
})

/** The app's `api` limiter on a prefix of its own, and the CLI's arguments that reach it. */
function api(): { limiter: RateLimiter; args: string[] } {
  const prefix = uniquePrefix()
  const limiter = new RateLimiter({ ...API, store: new RedisStore({ client: standaloneClient(), prefix }) })
  releasing.push(limiter)
  const redis = `redis://127.0.0.1:${redisEnvironment().standalonePort}`
  return { limiter, args: ['--redis', redis, '--prefix', prefix, '--config', CONFIG, '--limiter', 'api'] }
}

/** `ratewindow ...argv` in this process: its exit code and stdout. */
async function cli(argv: readonly string[]): Promise<{ code: number; stdout: string }> {
  let stdout = ''
  const code = await run(argv, {
    stdout: (text) => {
      stdout += text
    },
    stderr: () => undefined,
    interactive: false,
    screen: false,
  })
  return { code, stdout }
}

describe.concurrent('ratewindow', () => {
  it('overrides list printed its whole table on one line: one row per line, aligned', async () => {
    const { limiter, args } = api()
    await limiter.overrides.set('customer:7', { limit: 1000 })
    await limiter.overrides.set('customer:42', { limit: 50 })
    await limiter.overrides.block('203.0.113.9', { for: '1h', reason: 'stuffing' })
    const { code, stdout } = await cli(['overrides', 'list', ...args])
    expect(code).toBe(0)
    const lines = stdout.trimEnd().split('\n')
    expect(lines).toHaveLength(4)
    expect(lines[0]).toMatch(/^KEY +OVERRIDE +BLOCK$/)
    expect(lines.slice(1).sort()).toEqual([
      expect.stringMatching(/^203\.0\.113\.9 +- +until \S+ \(stuffing\)$/),
      expect.stringMatching(/^customer:42 +\{"limit":50\} +-$/),
      expect.stringMatching(/^customer:7 +\{"limit":1000\} +-$/),
    ])
    // Aligned as the other tables: each column starts at the same place on every line.
    const overrideColumn = lines[0]!.indexOf('OVERRIDE')
    for (const line of lines.slice(1)) expect(line[overrideColumn - 1]).toBe(' ')
    for (const line of lines.slice(1)) expect(line[overrideColumn]).not.toBe(' ')
  })
})
