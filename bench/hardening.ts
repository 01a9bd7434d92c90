/**
 * Scripted scenarios for the hardening of issue 10 (items 2, 6, 7, 8): each prints one figure, so that the same
 * script run on the previous version and on this one gives the before/after table. Public API only, a memory
 * store with a driven clock and a private redis-server on 127.0.0.1. Bounded: about a second of work.
 * Run: pnpm --filter @ratewindow/bench hardening
 */
import { runInNewContext } from 'node:vm'
import {
  fixedWindow,
  ipKey,
  MemoryStore,
  RateLimiter,
  RedisStore,
  type Rule,
  type Store,
  slidingWindowCounter,
  slidingWindowLog,
  tokenBucket,
} from '@ratewindow/core'
import { Redis } from 'ioredis'
import { RedisServer } from '../test/support/redis-server.js'
import { table } from './stats.js'

const rows: string[][] = []
const row = (scenario: string, figure: string | number) => rows.push([scenario, String(figure)])
const quiet = () => {}
let prefixes = 0

async function attempt<T>(fn: () => Promise<T> | T): Promise<T | string> {
  try {
    return await fn()
  } catch (error) {
    return `refused (${(error as { code?: string }).code ?? String(error)})`
  }
}

async function steppingClock(name: string, store: (clock: () => number) => Store, make: () => Rule) {
  let now = 1_700_000_000_000 // a whole second
  const limiter = new RateLimiter({ rules: make(), store: store(() => now), prefix: `h${prefixes++}` })
  let admitted = 0
  for (const time of [now, now - 2, now + 1]) {
    now = time
    for (let i = 0; i < 10; i++) if ((await limiter.limit('k')).allowed) admitted++
  }
  row(`${name}: admitted, limit 10, clock steps back 2 ms across a boundary`, admitted)
}

async function tokenRefunds(name: string, store: (clock: () => number) => Store) {
  let now = 1_700_000_000_000
  const limiter = new RateLimiter({
    rules: tokenBucket({ capacity: 10, refillRate: 10, interval: '1s' }),
    store: store(() => now),
    prefix: `h${prefixes++}`,
  })
  const first = []
  let admitted = 0
  for (let i = 0; i < 10; i++) first.push(await limiter.limit('k'))
  admitted += first.filter((result) => result.allowed).length
  now += 1_000
  for (let i = 0; i < 10; i++) if ((await limiter.limit('k')).allowed) admitted++
  for (const result of first) await limiter.refund(result)
  for (let i = 0; i < 10; i++) if ((await limiter.limit('k')).allowed) admitted++
  row(`${name}: token bucket 10 (10/s), admitted within 1 s with refunds after a refill`, admitted)
}

async function main() {
  const server = await RedisServer.start()
  const client = new Redis({ port: server.port, host: '127.0.0.1', maxRetriesPerRequest: 1 })
  const memory = (clock: () => number) => new MemoryStore({ clock })
  const redis = (clock: () => number) => new RedisStore({ client, clock })
  try {
    // Item 6: clocks stepping back.
    for (const [name, make] of [
      ['fixed window', () => fixedWindow({ limit: 10, window: '1s' })],
      ['sliding counter', () => slidingWindowCounter({ limit: 10, window: '1s' })],
    ] as const) {
      await steppingClock(`memory, ${name}`, memory, make)
      await steppingClock(`Redis, ${name}`, redis, make)
    }
    // Item 6: token-bucket refunds.
    await tokenRefunds('memory', memory)
    await tokenRefunds('Redis', redis)

    // Item 6: blocked cache and a costlier request.
    {
      let now = 1_700_000_000_000
      const limiter = new RateLimiter({
        rules: tokenBucket({ capacity: 4, refillRate: 1, interval: '1s' }),
        store: new MemoryStore({ clock: () => now }),
        blockedCache: { clock: () => now },
      })
      for (let i = 0; i < 5; i++) await limiter.limit('k')
      const costly = await limiter.limit('k', { cost: 3 })
      now += costly.retryAfter
      const retry = await limiter.limit('k', { cost: 3 })
      row(
        'blocked cache: cost-3 wait after a cost-1 denial (true 3000 ms); retry at that time',
        `${costly.retryAfter} ms; ${retry.allowed ? 'passes' : 'denied'}`,
      )
    }

    // Item 6: durations of 2^31 ms or more.
    {
      const slow: Store = {
        consume: (request) =>
          new Promise((resolve) => setTimeout(() => resolve(new MemoryStore().consume(request)), 5)),
        peek: (request) => new MemoryStore().peek(request),
        refund: () => {},
        reset: () => {},
      }
      const result = await attempt(async () => {
        const limiter = new RateLimiter({
          rules: fixedWindow({ limit: 1, window: '1m' }),
          store: slow,
          timeout: '25d',
          onError: quiet,
        })
        let policy = 0
        for (let i = 0; i < 20; i++) if ((await limiter.limit('k')).source === 'policy') policy++
        return `${policy} of 20 answered by the failure policy`
      })
      row("timeout '25d', a store answering in 5 ms", String(result))
      let reads = 0
      const swept = await attempt(async () => {
        const store = new MemoryStore({
          sweepInterval: '30d',
          clock: () => {
            reads++
            return Date.now()
          },
        })
        await new Promise((resolve) => setTimeout(resolve, 100))
        store.close()
        return `${reads} sweeps in 100 ms`
      })
      row("sweepInterval '30d'", String(swept))
    }

    // Item 6: a memory-store clock reading NaN.
    {
      const errors: unknown[] = []
      const limiter = new RateLimiter({
        rules: fixedWindow({ limit: 10, window: '1m' }),
        store: new MemoryStore({ clock: () => Number.NaN }),
        onStoreError: 'deny',
        onError: (error) => errors.push(error),
      })
      let admitted = 0
      for (let i = 0; i < 100; i++) if ((await limiter.limit('k')).allowed) admitted++
      row(
        'memory clock NaN, limit 10, onStoreError deny: admitted of 100; reported',
        `${admitted}; ${errors.length}`,
      )
    }

    // Item 6: the log with a huge cost, on Redis.
    {
      const limiter = new RateLimiter({
        rules: slidingWindowLog({ limit: 200_000, window: '1h' }),
        store: new RedisStore({ client }),
        prefix: `h${prefixes++}`,
      })
      const started = performance.now()
      const result = await attempt(() => limiter.limit('k', { cost: 100_000 }))
      const ms = performance.now() - started
      row(
        'sliding log, cost 100,000 on Redis: outcome; time',
        `${typeof result === 'string' ? result : result.allowed ? 'allowed' : 'denied'}; ${ms.toFixed(0)} ms`,
      )
      const capped = performance.now()
      await attempt(() => limiter.limit('k2', { cost: 1_000 }))
      row('sliding log, cost 1,000 on Redis: time', `${(performance.now() - capped).toFixed(1)} ms`)
    }

    // Item 6: thenables and another realm's promises; look-alike rules.
    for (const [name, wrap] of [
      // biome-ignore lint/suspicious/noThenProperty: a thenable on purpose
      ['a bare thenable', (value: unknown) => ({ then: (resolve: (v: unknown) => void) => resolve(value) })],
      ["another realm's promise", (value: unknown) => runInNewContext('Promise.resolve(value)', { value })],
    ] as const) {
      const inner = new MemoryStore()
      const store = {
        consume: (request) => wrap(inner.consume(request)),
        peek: (request) => wrap(inner.peek(request)),
        refund: (request) => wrap(inner.refund(request)),
        reset: (target) => wrap(inner.reset(target)),
      } as Store
      const limiter = new RateLimiter({
        rules: fixedWindow({ limit: 5, window: '1m' }),
        store,
        onError: quiet,
      })
      let admitted = 0
      for (let i = 0; i < 20; i++) if ((await limiter.limit('k')).allowed) admitted++
      row(`custom store answering with ${name}: admitted of 20, limit 5`, admitted)
    }
    row(
      'a copy { ...rule } passed as rules',
      String(
        await attempt(() => {
          new RateLimiter({ rules: { ...fixedWindow({ limit: 5, window: '1m' }) } })
          return 'accepted'
        }),
      ),
    )

    // Item 2: a key of the wrong Redis type.
    {
      const errors: unknown[] = []
      const rule = fixedWindow({ limit: 5, window: '1h' })
      const store = new RedisStore({ client })
      const prefix = `h${prefixes++}`
      const limiter = new RateLimiter({ rules: rule, store, prefix, onError: (error) => errors.push(error) })
      await client.rpush(store.keyFor(limiter.namespace, 'victim', rule), 'x')
      let admitted = 0
      let policy = 0
      for (let i = 0; i < 20; i++) {
        const result = await limiter.limit('victim')
        if (result.allowed) admitted++
        if (result.source === 'policy') policy++
      }
      row(
        'key overwritten with a list, limit 5: admitted of 20; by the policy; onError calls',
        `${admitted}; ${policy}; ${errors.length}`,
      )
    }

    // Item 7: IP keys.
    for (const [name, address] of [
      ['NAT64 64:ff9b::/96', (i: number) => `64:ff9b::10.0.${i >> 8}.${i & 255}`],
      ['6to4 2002::/16', (i: number) => `2002:a00:${i.toString(16)}:1::1`],
      ['Teredo 2001::/32', (i: number) => `2001:0:4136:e378:8000:63bf:f5ff:${(0xffff - i).toString(16)}`],
      ['link-local fe80::/10', (i: number) => `fe80::${(i + 1).toString(16)}`],
    ] as const) {
      const keys = new Set(Array.from({ length: 1_000 }, (_, i) => ipKey(address(i))))
      row(`${name}: buckets for 1,000 distinct clients`, keys.size)
    }
    const site = new Set(
      Array.from({ length: 1_000 }, (_, i) => ipKey(`2002:cb00:7107:${i.toString(16)}::1`)),
    )
    row('6to4: buckets for one site (one IPv4) rotating through its /48', site.size)

    // Item 8: eviction.
    {
      const evicting = await RedisServer.start(['--maxmemory', '8mb', '--maxmemory-policy', 'volatile-lru'])
      const evictingClient = new Redis({ port: evicting.port, host: '127.0.0.1', maxRetriesPerRequest: 1 })
      const errors: unknown[] = []
      const limiter = new RateLimiter({
        rules: fixedWindow({ limit: 1, window: '1h' }),
        store: new RedisStore({ client: evictingClient }),
        onError: (error) => errors.push(error),
      })
      for (let i = 0; i < 20; i++) await limiter.limit(`k${i}`)
      row('Redis with maxmemory-policy volatile-lru: onError reports in 20 decisions', errors.length)
      evictingClient.disconnect()
      await evicting.stop()
    }
  } finally {
    client.disconnect()
    await server.stop()
  }
  console.log(table(['scenario', 'figure'], rows))
}

await main()
