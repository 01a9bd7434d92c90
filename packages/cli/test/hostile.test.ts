/**
 * What the attack round on the operator tools found in `ratewindow`'s output (issue 45, item 22), each pinned as an
 * operator meets it: the command line run (in this process) against a real Redis, its text read line by line.
 */
import { RateLimiter, RedisStore } from '@ratewindow/core'
import { storedHash } from '@ratewindow/core/stored'
import { afterAll, describe, expect, it } from 'vitest'
import { redisEnvironment, standaloneClient, uniquePrefix } from '../../../test/support/redis.js'
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

/** `ratewindow ...argv` in this process: its exit code, stdout and stderr. */
async function cli(argv: readonly string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = ''
  let stderr = ''
  const code = await run(argv, {
    stdout: (text) => {
      stdout += text
    },
    stderr: (text) => {
      stderr += text
    },
    interactive: false,
    screen: false,
  })
  return { code, stdout, stderr }
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

  it('top showed a hash where an override record held the raw key (the scan stopped before the record)', async () => {
    const { limiter, args } = api()
    const customers = Array.from({ length: 40 }, (_, i) => `customer:${i}`)
    await Promise.all(customers.map((key) => limiter.overrides.set(key, { limit: 6 })))
    for (let i = 0; i < 5; i++) await Promise.all(customers.map((key) => limiter.limit(key)))
    // 81 keys (40 counters, 40 records, one more counter): a scan of 41 reads about half of the records.
    await limiter.limit('anonymous')
    const { code, stdout } = await cli(['top', '--count', '50', '--scan', '41', ...args, '--json'])
    expect(code).toBe(0)
    const rows = JSON.parse(stdout).keys as { key: string; hashed: boolean }[]
    expect(rows.length).toBeGreaterThan(0)
    const anonymous = storedHash('anonymous')
    expect(rows.filter((row) => row.hashed && row.key !== anonymous)).toEqual([])
    expect(rows.filter((row) => !row.hashed).every((row) => customers.includes(row.key))).toBe(true)
  })

  it('top gave no hint for a hashed key: a line says how to read it, and that acting on it needs the raw key', async () => {
    const { limiter, args } = api()
    await limiter.overrides.set('customer:1', { limit: 6 })
    for (let i = 0; i < 5; i++)
      await Promise.all(['customer:1', 'anonymous'].map((key) => limiter.limit(key)))
    const { stdout } = await cli(['top', '--count', '2', ...args])
    const lines = stdout.trimEnd().split('\n')
    expect(lines[0]).toMatch(/^KEY +LIMITER +RULE +USED +LIMIT +USE +RESET$/)
    expect(lines[1]).toMatch(new RegExp(`^${storedHash('anonymous')} +api +5-per-1h +5 +5 +100%`))
    expect(lines[2]).toMatch(/^customer:1 +api +6-per-1h +5 +6 +83%/)
    expect(lines.slice(3)).toEqual([
      '',
      'A key shown as its hash has no override record holding its raw form: `ratewindow inspect --hash <hash>` reads it; reset, block and overrides need the raw key (your logs, or the keys refused most: `ratewindow watch --admin <url>`).',
      '3 keys scanned (all)',
    ])
  })

  it('top, overrides list and inspect printed format characters raw: a bidi override or a zero-width space made a key pass for another', async () => {
    const { limiter, args } = api()
    // Keys an attacker chose: U+202E shows "nimda" as "admin", U+200B and U+FEFF are invisible, U+2066–U+2069
    // reorder what they enclose. A block's reason is the attacker's too when it quotes the request.
    const hostile = ['\u202enimda', 'admin\u200b', 'user:\u20661\u2069', '\ufeffroot']
    await Promise.all(hostile.map((key) => limiter.overrides.set(key, { limit: 6 })))
    await limiter.overrides.block('mallory', { for: '1h', reason: 'sent by \u202eadmin' })
    await Promise.all(hostile.map((key) => limiter.limit(key)))
    const outputs = [
      (await cli(['top', '--count', '10', ...args])).stdout,
      (await cli(['overrides', 'list', ...args])).stdout,
      ...(await Promise.all(hostile.map(async (key) => (await cli(['inspect', key, ...args])).stdout))),
    ]
    for (const stdout of outputs) expect(stdout).not.toMatch(/\p{Cf}/u)
    const shown = ['\\u202enimda', 'admin\\u200b', 'user:\\u20661\\u2069', '\\ufeffroot']
    for (const stdout of outputs.slice(0, 2)) for (const key of shown) expect(stdout).toContain(key)
    for (const [i, key] of shown.entries()) expect(outputs[2 + i]).toContain(`(key ${key}, hash `)
    expect(outputs[1]).toContain('(sent by \\u202eadmin)')
  })

  it('a key copied from overrides list named another client: the escaped evil\\u202ex and the literal one printed alike, and unblock lifted the wrong block', async () => {
    const { limiter, args } = api()
    const attacker = 'evil\u202ex'
    const innocent = 'evil\\u202ex' // a well-formed key that spells the escape
    await limiter.operator.block(attacker, { for: '1h', reason: 'abuse' })
    await limiter.operator.block(innocent, { for: '1h', reason: 'mistake' })
    const listed = (await cli(['overrides', 'list', ...args])).stdout
    const shown = (reason: string) =>
      listed
        .split('\n')
        .find((line) => line.includes(reason))!
        .split(/\s+/)[0]!
    expect([shown('abuse'), shown('mistake')]).toEqual(['evil\\u202ex', 'evil\\\\u202ex'])
    // Each key, pasted back as shown, names its own client.
    expect((await cli(['unblock', shown('mistake'), ...args])).code).toBe(0)
    expect((await limiter.limit(innocent)).allowed).toBe(true)
    expect((await limiter.limit(attacker)).allowed).toBe(false)
    expect((await cli(['unblock', shown('abuse'), ...args])).code).toBe(0)
    expect((await limiter.limit(attacker)).allowed).toBe(true)
  })

  it('keys padded with characters outside Cf passed for others: U+2028, U+3164, U+00A0 and a blank braille pattern are escaped', async () => {
    const { limiter, args } = api()
    const hostile = ['vip:1\u2028', 'vip:1\u3164', 'vip:1\u00a0', 'vip:1\u2800', 'vip:1\u115f', 'vip:1\ufe0f']
    await Promise.all(hostile.map((key) => limiter.operator.set(key, { limit: 6 })))
    const { stdout } = await cli(['overrides', 'list', ...args])
    for (const raw of hostile) expect(stdout).not.toContain(raw)
    for (const shown of [
      'vip:1\\u2028',
      'vip:1\\u3164',
      'vip:1\\xa0',
      'vip:1\\u2800',
      'vip:1\\u115f',
      'vip:1\\ufe0f',
    ])
      expect(stdout).toContain(shown)
  })

  it('a backslash that starts no escape in a key argument is refused, naming the key', async () => {
    const { args } = api()
    const { code, stderr } = await cli(['inspect', 'a\\qb', ...args])
    expect(code).toBe(2)
    expect(stderr).toContain('starts no escape')
  })

  it('watch --admin http://user:token@host echoed the token in its frame and its error', async () => {
    const { args } = api()
    for (const admin of ['http://ops:s3cret-token@127.0.0.1:9/_rw', 'ops:s3cret-token@127.0.0.1:9']) {
      const { code, stdout, stderr } = await cli(['watch', '--once', '--admin', admin, ...args])
      expect(`${stdout}${stderr}`).not.toContain('s3cret')
      expect(code).toBe(2)
      expect(stderr).toContain('***@127.0.0.1:9')
    }
  })
})
