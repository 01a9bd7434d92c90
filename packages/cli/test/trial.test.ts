/**
 * What an outside trial of `ratewindow` found, each pinned as a user meets it (`node dist/bin.js` against real
 * Redis): a config holding live handles, an IP given for a limiter keyed by the client's (masked) IP, a database
 * the server refuses, sparse override records, control characters in keys, exit codes, help examples.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { createServer, type Server } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { type HttpRateLimitOptions, RateLimiter, RedisStore } from '@ratewindow/core'
import { rateLimiterOptionsFrom } from '@ratewindow/core/adapter'
import { storedHash } from '@ratewindow/core/stored'
import { rateLimit as expressRateLimit } from '@ratewindow/express'
import express from 'express'
import type { Cluster, Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { clusterClient, redisEnvironment, standaloneClient } from '../../../test/support/redis.js'
import { freePort, RedisClusterProcesses } from '../../../test/support/redis-server.js'
import { uniquePrefix } from '../../../test/support/redis-store-suite.js'
import { COMMAND_HELP } from '../src/help.js'
import { printable } from '../src/render.js'
import { run } from '../src/run.js'
import { limiters } from './fixtures/limiters.mjs'
import { CONFIG, ensureBuilt, ratewindow } from './support.js'

beforeAll(ensureBuilt, 120_000)

const API = limiters[0] as ConstructorParameters<typeof RateLimiter>[0]
const closing: (() => unknown)[] = []
afterAll(() => Promise.all(closing.map((close) => close())))

const work = mkdtempSync(join(tmpdir(), 'ratewindow-cli-trial-'))
closing.push(() => rmSync(work, { recursive: true, force: true }))
let configs = 0
/** A config module exporting `limiters` as written (JavaScript source). */
function config(source: string): string {
  const path = join(work, `config-${configs++}.mjs`)
  writeFileSync(path, `export const limiters = ${source}\n`)
  return path
}

const standalone = () => `redis://127.0.0.1:${redisEnvironment().standalonePort}`
const clusterUrl = () => {
  const [node] = redisEnvironment().clusterNodes
  return `redis://${node!.host}:${node!.port}`
}

/**
 * A Cluster of this file's own, for its SCANs: cli.test.ts, which runs alongside, pins that `inspect` sends no SCAN
 * to the shared one.
 */
let started: Promise<RedisClusterProcesses> | undefined
function ownCluster(): Promise<RedisClusterProcesses> {
  started ??= RedisClusterProcesses.start(3).then((cluster) => {
    closing.push(() => cluster.stop())
    return cluster
  })
  return started
}
const ownClusterUrl = async () => `redis://127.0.0.1:${(await ownCluster()).startupNodes[0]!.port}`

async function listen(server: Server): Promise<string> {
  const port = await freePort()
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve))
  closing.push(() => new Promise((resolve) => server.close(resolve)))
  return `http://127.0.0.1:${port}`
}

/** Override records (blocks) for `keys`, and `noise` other keys around them: records are sparse in the keyspace. */
async function sparseRecords(
  client: Redis | Cluster,
  prefix: string,
  keys: readonly string[],
  noise: number,
) {
  const limiter = new RateLimiter({ ...API, timeout: 10_000, store: new RedisStore({ client, prefix }) })
  closing.push(() => limiter.release())
  await Promise.all(keys.map((key) => limiter.overrides.block(key, { for: '1h' })))
  const names = Array.from({ length: noise }, (_, i) => `${prefix}noise:${i}`)
  for (let at = 0; at < noise; at += 500)
    await Promise.all(names.slice(at, at + 500).map((name) => client.set(name, '1', 'EX', 600)))
  return limiter
}

describe.concurrent('ratewindow, as the outside trial used it', () => {
  it('exits with its code once the command is done, even when the config module holds live handles (an app client, a timer)', async () => {
    const env = { RATEWINDOW_TEST_REDIS_PORT: String(redisEnvironment().standalonePort) }
    const args = [
      '--redis',
      standalone(),
      '--prefix',
      uniquePrefix(),
      '--config',
      fileURLToPath(new URL('./fixtures/live-handles.mjs', import.meta.url)),
    ]
    // Bounded: before, the process printed its result and never exited (killed here: code null).
    const blocked = await ratewindow(['block', 'bob', '--for', '1m', ...args, '--json'], {
      env,
      timeout: 20_000,
    })
    expect(blocked.code).toBe(0)
    expect(blocked.json()).toMatchObject({ key: 'bob', limiter: 'login' })
    const missing = await ratewindow(['overrides', 'get', 'carol', ...args], { env, timeout: 20_000 })
    expect(missing.code).toBe(3)
    expect(missing.stderr).toContain('no override')
  })

  describe.sequential('an address given for a limiter keyed by the client IP is keyed as the HTTP engine keys it', () => {
    const V6 = { name: 'v6', limit: 2, window: '15m', overrides: true } as const
    let base: string
    let args: string[]
    beforeAll(async () => {
      const prefix = uniquePrefix()
      const app = express()
      app.set('trust proxy', true)
      app.use(expressRateLimit({ ...V6, store: new RedisStore({ client: standaloneClient(), prefix }) }))
      app.get('/', (_request, response) => void response.send('ok'))
      base = await listen(createServer(app))
      args = ['--redis', standalone(), '--prefix', prefix, '--config', config(JSON.stringify([V6]))]
    })
    const from = (address: string) =>
      fetch(base, { headers: { 'x-forwarded-for': address } }).then((response) => response.status)

    it('block of an IPv6 address blocks its /56, the key the app limits, and says so', async () => {
      expect(await from('2001:db8:abcd:12::7')).toBe(200)
      const blocked = await ratewindow(['block', '2001:db8:abcd:12::7', '--for', '1h', ...args, '--json'])
      expect(blocked.code).toBe(0)
      expect(blocked.json()).toEqual({
        key: '2001:db8:abcd::/56',
        given: '2001:db8:abcd:12::7',
        limiter: 'v6',
        until: expect.any(Number),
      })
      expect(await from('2001:db8:abcd:12::7')).toBe(429)
      expect(await from('2001:db8:abcd:ff::1')).toBe(429) // the same /56
      const text = await ratewindow(['unblock', '2001:db8:abcd:12::7', ...args])
      expect(text.stdout).toContain('key: 2001:db8:abcd::/56 (the /56 of the address given)')
      expect(await from('2001:db8:abcd:12::7')).toBe(200)
      const inspected = await ratewindow(['inspect', '2001:db8:abcd:12::7', ...args, '--json'])
      expect(inspected.json().limiters[0]).toMatchObject({ key: '2001:db8:abcd::/56', rules: [{ used: 2 }] })
    })

    it('an IPv4-mapped address is its IPv4; the subnet typed as the key, and any key that is not an address, stay as they are', async () => {
      const mapped = await ratewindow(['block', '::ffff:203.0.113.50', '--for', '1h', ...args, '--json'])
      expect(mapped.json()).toMatchObject({ key: '203.0.113.50', given: '::ffff:203.0.113.50' })
      expect(await from('203.0.113.50')).toBe(429)
      const subnet = await ratewindow(['block', '2001:db8:1::/56', '--for', '1h', ...args, '--json'])
      expect(subnet.json()).toEqual({ key: '2001:db8:1::/56', limiter: 'v6', until: expect.any(Number) })
      expect(await from('2001:db8:1:2::3')).toBe(429)
      const named = await ratewindow(['overrides', 'set', 'customer:42', '--limit', '9', ...args, '--json'])
      expect(named.json()).toEqual({ key: 'customer:42', limiter: 'v6', override: { limit: 9 } })
    })

    it('fixed rules without ipv6Subnet are RateLimiter options: the key as given, with a warning; with ipv6Subnet, keyed by IP', async () => {
      const rules = [
        '--redis',
        standalone(),
        '--prefix',
        uniquePrefix(),
        '--config',
        CONFIG,
        '--limiter',
        'api',
      ]
      const blocked = await ratewindow(['block', '2001:db8:abcd:12::7', '--for', '1h', ...rules, '--json'])
      expect(blocked.json()).toEqual({
        key: '2001:db8:abcd:12::7',
        limiter: 'api',
        until: expect.any(Number),
      })
      expect(blocked.stderr).toContain('its key is 2001:db8:abcd::/56: add `ipv6Subnet` to its config entry')
      // The README's api: fixed rules and `ipv6Subnet: 56`, as the middleware keys it.
      const readme = fileURLToPath(new URL('./fixtures/readme-config.mjs', import.meta.url))
      const keyed = await ratewindow([
        'block',
        '2001:db8:abcd:12::7',
        '--for',
        '1h',
        ...rules,
        '--config',
        readme,
        '--json',
      ])
      expect(keyed.json()).toMatchObject({
        key: '2001:db8:abcd::/56',
        given: '2001:db8:abcd:12::7',
        limiter: 'api',
      })
    })
  })

  it('a database the server refuses fails before any command runs (exit 4, the server’s message), nothing written', async () => {
    const prefix = uniquePrefix()
    const url = `${standalone()}/99`
    const blocked = await ratewindow([
      'block',
      'typo',
      '--for',
      '1m',
      '--redis',
      url,
      '--prefix',
      prefix,
      '--config',
      CONFIG,
      '--limiter',
      'api',
    ])
    expect(blocked.code).toBe(4)
    expect(blocked.stderr).toContain('refused database 99')
    expect(blocked.stderr).toContain('DB index is out of range')
    expect(await standaloneClient().keys(`${prefix}*`)).toEqual([])
    // A database it serves is used, as the URL says.
    const selected = await ratewindow([
      'block',
      'typo',
      '--for',
      '1m',
      '--redis',
      `${standalone()}/3`,
      '--prefix',
      prefix,
      '--config',
      CONFIG,
      '--limiter',
      'api',
    ])
    expect(selected.code).toBe(0)
    const db3 = standaloneClient()
    await db3.select(3)
    expect((await db3.keys(`${prefix}*`)).length).toBe(1)
    expect(await standaloneClient().keys(`${prefix}*`)).toEqual([])
  })

  it('--cluster against a standalone server says so (exit 2), and a Cluster takes no database but 0', async () => {
    const standaloneCluster = await ratewindow(['limiters', '--cluster', '--redis', standalone()])
    expect(standaloneCluster.code).toBe(2)
    expect(standaloneCluster.stderr).toContain('is not a Cluster node')
    const db = await ratewindow(['limiters', '--redis', `${clusterUrl()}/2`])
    expect(db.code).toBe(2)
    expect(db.stderr).toContain('a Cluster has database 0 only')
  })

  for (const [name, client, url] of [
    ['standalone', async () => standaloneClient(), async () => standalone()],
    ['Cluster', async () => clusterClient((await ownCluster()).startupNodes), ownClusterUrl],
  ] as const) {
    it(`overrides list fills a page up to --count records where they are sparse (${name}): the cursor continues`, async () => {
      const prefix = uniquePrefix()
      const keys = Array.from({ length: 30 }, (_, i) => `sparse-${i}`)
      await sparseRecords(await client(), prefix, keys, 6_000)
      const args = [
        'overrides',
        'list',
        '--redis',
        await url(),
        '--prefix',
        prefix,
        '--config',
        CONFIG,
        '--limiter',
        'api',
      ]
      const first = await ratewindow([...args, '--count', '20', '--json'])
      expect(first.stderr).toBe('')
      expect(first.code).toBe(0)
      const page = first.json()
      expect(page.records.length).toBeGreaterThanOrEqual(20)
      const listed = page.records.map((record: { key: string }) => record.key)
      let cursor: string | null = page.cursor
      while (cursor !== null) {
        const next = (await ratewindow([...args, '--count', '20', '--cursor', cursor, '--json'])).json()
        listed.push(...next.records.map((record: { key: string }) => record.key))
        cursor = next.cursor
      }
      expect(listed.sort()).toEqual([...keys].sort())
    })
  }

  it('control characters and lone surrogates in keys and reasons are escaped in text output, not in --json', async () => {
    const prefix = uniquePrefix()
    const limiter = new RateLimiter({
      ...API,
      timeout: 10_000,
      store: new RedisStore({ client: standaloneClient(), prefix }),
    })
    closing.push(() => limiter.release())
    const key = 'evil\u001b]0;PWNED\u0007\u001b[31mRED\u009b2J\u007f'
    await limiter.overrides.block(key, { for: '1h', reason: 'line1\nline2\ud800' })
    const args = ['--redis', standalone(), '--prefix', prefix, '--config', CONFIG, '--limiter', 'api']
    const listed = await ratewindow(['overrides', 'list', ...args])
    // Newlines between the table's rows, and no other control character.
    // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it looks for
    expect(listed.stdout).not.toMatch(/[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/)
    expect(listed.stdout).toContain('evil\\x1b]0;PWNED\\x07\\x1b[31mRED\\x9b2J\\x7f')
    // Redis keeps UTF-8: the lone surrogate comes back as U+FFFD (printable's own test escapes one).
    expect(listed.stdout).toContain('(line1\\x0aline2\ufffd)')
    const json = (await ratewindow(['overrides', 'list', ...args, '--json'])).json()
    expect(json.records[0]).toMatchObject({ key, block: { reason: 'line1\nline2\ufffd' } })
    expect(printable('a\ud800b\udc00c\ud83d\ude00\u0085é')).toBe('a\\ud800b\\udc00c\ud83d\ude00\\x85é')
    const inspected = await ratewindow(['inspect', 'a\u001b[2Jb', ...args])
    expect(inspected.code).toBe(3)
    expect(inspected.stdout).toContain('a\\x1b[2Jb')
    expect(inspected.stdout + inspected.stderr).not.toContain('\u001b')
  })

  it('exit codes as the README’s table says', async () => {
    const redis = ['--redis', standalone(), '--prefix', uniquePrefix()]
    const configured = [...redis, '--config', CONFIG]
    expect((await ratewindow(['top', '--limiter', 'nope', '--scan', '100', ...configured])).code).toBe(3)
    expect((await ratewindow(['top', '--limiter', 'nope', '--scan', '100', ...redis])).code).toBe(3)
    const deleted = await ratewindow([
      'overrides',
      'delete',
      'never-had-one',
      ...configured,
      '--limiter',
      'api',
      '--json',
    ])
    expect(deleted.code).toBe(3)
    expect(deleted.json().error.code).toBe('ERR_RATEWINDOW_NOT_FOUND')
    const evil = [
      'overrides',
      'set',
      'bob',
      '--override',
      '{"limit":7,"evil":1}',
      ...configured,
      '--limiter',
      'api',
    ]
    expect((await ratewindow(evil)).code).toBe(2)
    const admin = await ratewindow(['watch', '--once', '--admin', 'notaurl', '--scan', '10', ...redis])
    expect(admin.code).toBe(2)
    expect(admin.stderr).toContain('`--admin`')
    // `inspect` of a key Redis holds nothing for: 3 with a config (its full quota printed first) as without.
    const nobody = await ratewindow(['inspect', 'nobody', ...configured, '--limiter', 'api', '--json'])
    expect(nobody.code).toBe(3)
    expect(nobody.json()).toMatchObject({
      key: 'nobody',
      limiters: [{ limiter: 'api', rules: [{ used: 0 }] }],
    })
    expect((await ratewindow(['inspect', 'nobody', ...redis])).code).toBe(3)
    const json = await ratewindow(['--json'])
    expect(json.code).toBe(2)
    expect(json.json().error.code).toBe('ERR_RATEWINDOW_CLI_USAGE')
    const version = await ratewindow(['--version'])
    expect(version.code).toBe(0)
    expect(version.stdout).toMatch(/^ratewindow \d+\.\d+\.\d+/)
    const dash = await ratewindow(['inspect', '-42', ...redis])
    expect(dash.code).toBe(2)
    expect(dash.stderr).toContain('after `--`')
    expect((await ratewindow(['inspect', ...redis, '--', '-42'])).code).toBe(3)
  })

  it('a config entry that is null, and two limiters of one name, are refused naming them', async () => {
    const redis = ['limiters', '--redis', standalone(), '--prefix', uniquePrefix(), '--scan', '10']
    const empty = await ratewindow([...redis, '--config', config("[{ name: 'a', limit: 5 }, null]")])
    expect(empty.code).toBe(1)
    expect(empty.stderr).toContain('`limiters[1]` is null')
    const twice = await ratewindow([
      ...redis,
      '--config',
      config("[{ name: 'a', limit: 5 }, { name: 'a', limit: 9 }]"),
    ])
    expect(twice.code).toBe(1)
    expect(twice.stderr).toContain('two limiters are named "a"')
    const typescript = join(work, 'ratewindow.config.ts')
    writeFileSync(typescript, "export const limiters: object[] = [{ name: 'a', limit: 5 }]\n")
    const ts = await ratewindow([...redis, '--config', typescript])
    expect(ts.code).toBe(1)
    expect(ts.stderr).toContain(
      "through a loader (NODE_OPTIONS='--import tsx' ratewindow …), or write it as .mjs",
    )
  })

  it('watch clears the screen between frames on a terminal only', async () => {
    const frames = async (screen: boolean) => {
      const controller = new AbortController()
      let stdout = ''
      const code = await run(['watch', '--redis', standalone(), '--prefix', uniquePrefix(), '--scan', '10'], {
        stdout: (text) => {
          stdout += text
          controller.abort() // one frame
        },
        stderr: () => {},
        screen,
        interactive: false,
        signal: controller.signal,
      })
      expect(code).toBe(0)
      return stdout
    }
    expect(await frames(false)).not.toContain('\u001b')
    expect(await frames(true)).toContain('\u001b[2J\u001b[H')
  })

  it('every --help example works as printed against the README’s config (examples naming admin endpoints aside)', async () => {
    const prefix = uniquePrefix()
    const readme = fileURLToPath(new URL('./fixtures/readme-config.mjs', import.meta.url))
    // customer:42 has made a request and holds an override, so that `inspect` finds state even when the
    // request's fixed window ends between the two (the `overrides delete` example, which runs after `inspect`,
    // removes the override).
    const { api } = (await import('./fixtures/readme-config.mjs')) as { api: HttpRateLimitOptions<unknown> }
    const store = new RedisStore({ client: standaloneClient(), prefix })
    const limiter = new RateLimiter(rateLimiterOptionsFrom({ ...api, timeout: 10_000, store }))
    closing.push(() => limiter.release())
    await limiter.limit('customer:42')
    await limiter.operator.set('customer:42', { limit: 1000 }, { ttl: '1h' })
    const examples = Object.values(COMMAND_HELP)
      .flatMap((help) => help.split('\n'))
      .map((line) => /^\s*(?:Examples?:)?\s*ratewindow (.*)$/.exec(line)?.[1])
      .filter(
        (line): line is string =>
          line !== undefined && !/\[|\(|\b[A-Z]+\b/.test(line) && !line.includes('--admin'),
      )
    expect(examples.length).toBeGreaterThanOrEqual(12)
    for (const example of examples) {
      const args = [...example.matchAll(/"([^"]*)"|(\S+)/g)].map((match) =>
        (match[1] ?? match[2]!).replace('./ratewindow.config.mjs', readme),
      )
      const ran = await ratewindow([...args, '--redis', standalone(), '--prefix', prefix])
      expect({ example, code: ran.code, stderr: ran.stderr }).toEqual({ example, code: 0, stderr: '' })
    }
  })

  it('inspect --hash reads a key known by its hash only, with the config (its block shown) and without', async () => {
    const prefix = uniquePrefix()
    const store = new RedisStore({ client: standaloneClient(), prefix })
    const limiter = new RateLimiter({ ...API, timeout: 10_000, store })
    closing.push(() => limiter.release())
    await limiter.limit('hidden')
    await limiter.limit('hidden')
    await limiter.overrides.block('hidden', { for: '1h', reason: 'abuse' })
    const hash = storedHash('hidden')
    const redis = ['--redis', standalone(), '--prefix', prefix]
    const configured = await ratewindow([
      'inspect',
      '--hash',
      hash,
      ...redis,
      '--config',
      CONFIG,
      '--limiter',
      'api',
      '--json',
    ])
    expect(configured.code).toBe(0)
    expect(configured.json()).toMatchObject({
      key: hash,
      hash,
      limiters: [{ limiter: 'api', rules: [{ used: 2 }], block: { reason: 'abuse' } }],
    })
    const bare = await ratewindow(['inspect', '--hash', hash, ...redis, '--json'])
    expect(bare.code).toBe(0)
    expect(bare.json().limiters[0]).toMatchObject({ namespace: 'api:fw3600000x5:', rules: [{ used: 2 }] })
    expect((await ratewindow(['inspect', '--hash', 'short', ...redis])).code).toBe(2)
  })
})
