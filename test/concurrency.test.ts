import { fork } from 'node:child_process'
import { once } from 'node:events'
import { join } from 'node:path'
import {
  ConcurrencyLimiter,
  type ConcurrencyStore,
  type Duration,
  MemoryStore,
  RateLimitError,
  type RedisScriptRunner,
  RedisStore,
} from '@ratewindow/core'
import { afterAll, describe, expect, it, vi } from 'vitest'
import { ManualClock } from './support/clock.js'
import { until } from './support/connections.js'
import { clusterClient, redisEnvironment, standaloneClient } from './support/redis.js'
import { clientFamily, connect } from './support/redis-clients.js'
import { RedisServer } from './support/redis-server.js'
import { WORKER_EXEC_ARGV, workerBundle } from './support/worker-bundle.js'

let prefixes = 0
const uniquePrefix = () => `cc${process.pid}x${prefixes++}`

const STORES: [string, (clock: ManualClock) => ConcurrencyStore][] = [
  ['MemoryStore', (clock) => new MemoryStore({ clock: clock.read })],
  ['RedisStore (standalone)', (clock) => new RedisStore({ client: standaloneClient(), clock: clock.read })],
  ['RedisStore (Cluster)', (clock) => new RedisStore({ client: clusterClient(), clock: clock.read })],
]

describe.each(STORES)('ConcurrencyLimiter on %s', (_, makeStore) => {
  const setup = (limit: number, lease: Duration = '10s') => {
    const clock = new ManualClock(1_700_000_000_000)
    const store = makeStore(clock)
    const limiter = new ConcurrencyLimiter({
      limit,
      lease,
      store,
      prefix: uniquePrefix(),
      timeout: '30s',
    })
    return { clock, limiter, store }
  }

  it('holds at most `limit` in flight per key; a release frees a slot once', async () => {
    const { limiter } = setup(2)
    const first = await limiter.acquire('k')
    const second = await limiter.acquire('k')
    expect([first, second].map((slot) => [slot.allowed, slot.inFlight, slot.remaining])).toEqual([
      [true, 1, 1],
      [true, 2, 0],
    ])
    expect(await limiter.acquire('k')).toMatchObject({ allowed: false, inFlight: 2, remaining: 0 })
    expect((await limiter.acquire('other')).allowed).toBe(true)
    await first.release()
    await first.release() // a second release gives nothing more back
    expect(await limiter.acquire('k')).toMatchObject({ allowed: true, inFlight: 2 })
    expect((await limiter.acquire('k')).allowed).toBe(false)
  })

  it('a lease never released comes back after the lease time, not 1 ms earlier', async () => {
    const { clock, limiter } = setup(1, '5s')
    expect((await limiter.acquire('k')).allowed).toBe(true)
    clock.advance(4_999)
    expect((await limiter.acquire('k')).allowed).toBe(false)
    clock.advance(1)
    expect((await limiter.acquire('k')).allowed).toBe(true)
  })

  it('a holder acquiring its own lease again renews it, at the limit too, and is counted once', async () => {
    const { clock, store } = setup(1)
    const prefix = uniquePrefix()
    const lease = (id: string) => store.acquire({ prefix, key: 'k', id, limit: 1, leaseMs: 5_000 })
    expect(await lease('holder')).toMatchObject({ allowed: true, inFlight: 1 })
    clock.advance(4_000)
    expect(await lease('holder')).toMatchObject({ allowed: true, inFlight: 1, nextExpiry: 5_000 })
    clock.advance(4_000) // past the first lease's expiry, inside the renewed one
    expect(await lease('other')).toMatchObject({ allowed: false, inFlight: 1 })
    clock.advance(1_000)
    expect(await lease('other')).toMatchObject({ allowed: true, inFlight: 1 })
  })

  it('concurrent acquires never admit more than the limit', async () => {
    const { limiter } = setup(5)
    const slots = await Promise.all(Array.from({ length: 50 }, () => limiter.acquire('k')))
    expect(slots.filter((slot) => slot.allowed)).toHaveLength(5)
    await Promise.all(slots.map((slot) => slot.release()))
    expect((await limiter.acquire('k')).inFlight).toBe(1)
  })

  it('a burst of acquires and releases over many keys: exact per key, and grouped on Redis (fewer calls than leases)', async () => {
    const { limiter, store } = setup(3)
    const stats = () => ({ ...((store as Partial<RedisStore>).groupStats ?? { calls: 0, entries: 0 }) })
    const before = stats()
    const slots = await Promise.all(Array.from({ length: 400 }, (_, i) => limiter.acquire(`k${i % 20}`)))
    for (let key = 0; key < 20; key++) {
      expect(slots.filter((slot, i) => i % 20 === key && slot.allowed)).toHaveLength(3)
    }
    await Promise.all(slots.map((slot) => slot.release()))
    const after = await Promise.all(Array.from({ length: 20 }, (_, key) => limiter.acquire(`k${key}`)))
    expect(after.map((slot) => slot.inFlight)).toEqual(Array(20).fill(1))
    if (store instanceof RedisStore) {
      const grouped = { calls: stats().calls - before.calls, entries: stats().entries - before.entries }
      expect(grouped.entries).toBe(400 + 60 + 20)
      expect(grouped.calls).toBeLessThan(grouped.entries / 2)
    }
  })
})

describe('ConcurrencyLimiter: failures and bad options', () => {
  it('answers by the failure policy when the store fails, and reports it', async () => {
    const errors: unknown[] = []
    const failing: ConcurrencyStore = {
      acquire: () => Promise.reject(new Error('connection refused')),
      release: () => Promise.reject(new Error('connection refused')),
    }
    const open = new ConcurrencyLimiter({ limit: 1, store: failing, onError: (e) => errors.push(e) })
    expect(await open.acquire('k')).toMatchObject({ allowed: true, source: 'policy' })
    const closed = new ConcurrencyLimiter({
      limit: 1,
      store: failing,
      onStoreError: 'deny',
      onError: () => {},
    })
    expect(await closed.acquire('k')).toMatchObject({ allowed: false, source: 'policy' })
    await new Promise((resolve) => setImmediate(resolve))
    expect(errors.length).toBeGreaterThanOrEqual(1)
  })

  it('a store without its own bound (no boundsWait): a lease granted after the timeout is released again', async () => {
    const memory = new MemoryStore()
    let answer: (() => void) | undefined
    const late: ConcurrencyStore = {
      // The acquire is applied only when the test says so, long after the limiter's timeout.
      acquire: (request) => new Promise((resolve) => (answer = () => resolve(memory.acquire(request)))),
      release: async (request) => memory.release(request),
    }
    const limiter = new ConcurrencyLimiter({
      limit: 1,
      store: late,
      timeout: '20ms',
      onStoreError: 'deny',
      onError: () => {},
    })
    expect(await limiter.acquire('k')).toMatchObject({ allowed: false, source: 'policy' })
    answer!() // applied now, after its release
    await until(
      () => memory.acquire({ prefix: 'rwc', key: 'k', id: 'probe', limit: 1, leaseMs: 1_000 }).allowed,
      'the late lease is released',
    )
  })

  it('tries failed releases again in rounds: one probe while the store fails, then all at once; none past the lease', async () => {
    vi.useFakeTimers()
    try {
      let down = true
      let calls = 0
      const released = new Set<string>()
      const store: ConcurrencyStore = {
        acquire: async () => ({ allowed: true, inFlight: 1, nextExpiry: 0 }),
        release: async (request) => {
          calls++
          if (down) throw new Error('connection refused')
          released.add(request.id)
        },
      }
      const limiter = new ConcurrencyLimiter({ limit: 10, lease: '1m', store, onError: () => {} })
      const slots = await Promise.all(Array.from({ length: 5 }, () => limiter.acquire('k')))
      await Promise.all(slots.map((slot) => slot.release()))
      expect(calls).toBe(5)
      await vi.advanceTimersByTimeAsync(100)
      expect(calls).toBe(6) // one probe
      await vi.advanceTimersByTimeAsync(200)
      expect(calls).toBe(7) // the next, after twice the wait
      down = false
      await vi.advanceTimersByTimeAsync(400)
      expect(released.size).toBe(5)
      expect(calls).toBe(12)
      await vi.advanceTimersByTimeAsync(60_000)
      expect(calls).toBe(12)

      // A store that never comes back: the retries stop once the lease has run out by itself.
      down = true
      const short = new ConcurrencyLimiter({ limit: 1, lease: '1s', store, onError: () => {} })
      await (await short.acquire('k')).release()
      await vi.advanceTimersByTimeAsync(2_000)
      const after = calls
      await vi.advanceTimersByTimeAsync(60_000)
      expect(calls).toBe(after)
    } finally {
      vi.useRealTimers()
    }
  })

  it.each([
    [{ limit: 0 }, 'limit'],
    [{ limit: 2, lease: 'x' }, 'lease'],
    [{ limit: 2, store: {} }, 'store'],
  ])('%j is refused naming %s', (options, option) => {
    expect(() => new ConcurrencyLimiter(options as never)).toThrow(RateLimitError)
    try {
      new ConcurrencyLimiter(options as never)
    } catch (error) {
      expect((error as RateLimitError).option).toBe(option)
    }
  })
})

describe('ConcurrencyLimiter on a real redis-server: a process killed while holding slots', () => {
  it('its slots stay taken while their leases live and come back when they expire', async () => {
    const { standalonePort } = redisEnvironment()
    const prefix = uniquePrefix()
    const takenAt = 1_700_000_000_000
    const child = fork(
      await workerBundle(join(import.meta.dirname, 'support', 'lease-worker.ts')),
      [String(standalonePort), prefix, 'k', '3', '60000', String(takenAt)],
      {
        execArgv: WORKER_EXEC_ARGV,
        stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      },
    )
    const [message] = (await once(child, 'message')) as [{ held: number }]
    expect(message.held).toBe(3)
    child.kill('SIGKILL')
    await once(child, 'exit')
    expect(child.signalCode).toBe('SIGKILL')

    const clock = new ManualClock(takenAt)
    const client = standaloneClient()
    const store = new RedisStore({ client, clock: clock.read })
    const limiter = new ConcurrencyLimiter({ limit: 3, lease: '60s', prefix, store, timeout: '30s' })
    // The dead process never released: all three slots are still held.
    expect(await client.zcard(store.leaseKeyFor(prefix, 'k'))).toBe(3)
    clock.advance(59_999)
    expect(await limiter.acquire('k')).toMatchObject({ allowed: false, inFlight: 3 })
    // Once the leases expire, the slots come back: the crash leaked nothing for longer than the lease.
    clock.advance(1)
    const slot = await limiter.acquire('k')
    expect(slot).toMatchObject({ allowed: true, inFlight: 1 })
    expect(await client.zcard(store.leaseKeyFor(prefix, 'k'))).toBe(1)
    await slot.release()
    expect(await client.exists(store.leaseKeyFor(prefix, 'k'))).toBe(0)
  })

  it('on the server clock too: short leases of a killed process expire by themselves', async () => {
    const { standalonePort } = redisEnvironment()
    const prefix = uniquePrefix()
    const child = fork(
      await workerBundle(join(import.meta.dirname, 'support', 'lease-worker.ts')),
      [String(standalonePort), prefix, 'k', '2', '1000', 'server'],
      {
        execArgv: WORKER_EXEC_ARGV,
        stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      },
    )
    const [message] = (await once(child, 'message')) as [{ held: number }]
    expect(message.held).toBe(2)
    child.kill('SIGKILL')
    await once(child, 'exit')
    const client = standaloneClient()
    const store = new RedisStore({ client })
    const limiter = new ConcurrencyLimiter({ limit: 2, lease: '1s', prefix, store, timeout: '30s' })
    const key = store.leaseKeyFor(prefix, 'k')
    // Each lease is scored by its expiry: at most 1 s after it was taken.
    const [time] = await client.time()
    for (const score of (await client.zrange(key, 0, -1, 'WITHSCORES')).filter((_, i) => i % 2 === 1))
      expect(Number(score)).toBeLessThanOrEqual(Number(time) * 1_000 + 1_000 + 1_000)
    // Poll (bounded) on the real server clock until both slots are back.
    let slot = await limiter.acquire('k')
    await until(
      async () => {
        if (slot.allowed && slot.inFlight === 1) return true
        await slot.release()
        slot = await limiter.acquire('k')
        return false
      },
      'the leases of 1 s run out on the server clock (both slots back)',
      { within: 10_000, every: 100 },
    )
    expect(slot).toMatchObject({ allowed: true, inFlight: 1 })
    await slot.release()
  })
})

describe('ConcurrencyLimiter: an acquire applied after it timed out (standalone)', () => {
  it('is released again when its late reply arrives, even though its first release reached the store before it', async () => {
    // A Cluster client retries a call on the promoted replica's connection while the limiter's release for it
    // goes straight there (issue 30's failover test): the release runs first, then the late acquire takes a lease
    // nobody releases. Two connections reproduce that order: the acquire waits behind a BLPOP on one, its release
    // goes on the other.
    const slow = standaloneClient()
    const fast = standaloneClient()
    let divert = false
    const runner: RedisScriptRunner = {
      family: 'two connections',
      cluster: false,
      evalSha(sha1, keys, args) {
        const connection = divert ? slow : fast
        divert = false
        return connection.evalsha(sha1, keys.length, ...keys, ...args)
      },
      eval: (lua, keys, args) => fast.eval(lua, keys.length, ...keys, ...args),
      del: (keys) => fast.del(...keys),
    }
    const errors: unknown[] = []
    const store = new RedisStore({ client: runner })
    const prefix = uniquePrefix()
    const limiter = new ConcurrencyLimiter({
      limit: 1,
      lease: '1m',
      store,
      prefix,
      onStoreError: 'deny',
      timeout: '200ms',
      onError: (error) => errors.push(error),
    })
    await (await limiter.acquire('warm')).release() // the script is cached on the server
    const blocked = slow.blpop(`${prefix}:never`, 1) // the slow connection answers nothing else for 1 s
    divert = true
    const timedOut = await limiter.acquire('k')
    expect(timedOut).toMatchObject({ allowed: false, source: 'policy' })
    expect(errors).toHaveLength(1) // the timeout; its release went on the other connection, before the acquire
    await blocked
    await slow.ping() // answered after the late acquire: its reply has arrived
    const leases = store.leaseKeyFor(prefix, 'k')
    await until(async () => (await fast.zcard(leases)) === 0, 'the late lease is released (1 min lease)')
    expect(await limiter.acquire('k')).toMatchObject({ allowed: true, source: 'store', inFlight: 1 })
  })
})

/** Acquires (100 ms apart, bounded) until the store answers `allowed`; the last result. */
async function acquireOnceBack(limiter: ConcurrencyLimiter, key: string) {
  let slot = await limiter.acquire(key)
  await until(
    async () => {
      if (slot.source === 'store' && slot.allowed) return true
      slot = await limiter.acquire(key)
      return false
    },
    () =>
      `the restarted server gives a slot of ${key} (last answer: ${slot.source}, allowed ${slot.allowed})`,
    { within: 10_000, every: 100 },
  )
  return slot
}

describe('ConcurrencyLimiter across a Redis restart (standalone)', () => {
  const servers: RedisServer[] = []
  afterAll(async () => {
    await Promise.all(servers.splice(0).map((server) => server.stop()))
  })
  const started = async (extraArgs: string[] = []) => {
    const server = await RedisServer.start(extraArgs)
    servers.push(server)
    const client = await connect(clientFamily('ioredis 5'), server.port)
    const errors: unknown[] = []
    const limiter = (limit: number) =>
      new ConcurrencyLimiter({
        limit,
        lease: '1m',
        prefix: uniquePrefix(),
        store: new RedisStore({ client }),
        onStoreError: 'deny',
        timeout: '500ms',
        onError: (error) => errors.push(error),
      })
    return { server, limiter, errors }
  }

  it('a release that failed while Redis was down is sent again: the slot is back once Redis answers, not after the lease', async () => {
    // Persistence on: the lease outlives the restart, as on a server that reloads its data.
    const { server, limiter, errors } = await started(['--appendonly', 'yes', '--appendfsync', 'always'])
    const concurrency = limiter(1)
    const slot = await concurrency.acquire('k')
    expect(slot).toMatchObject({ allowed: true, source: 'store' })
    await server.kill('SIGKILL')
    await slot.release() // fails: reported, and tried again in the background
    expect(errors.length).toBeGreaterThan(0)
    await server.restart()
    // Lease 1 minute: without the retried release, the slot would stay taken for all of it.
    const back = await acquireOnceBack(concurrency, 'k')
    expect(back).toMatchObject({ allowed: true, source: 'store', inFlight: 1 })
    expect(await concurrency.acquire('k')).toMatchObject({ allowed: false, source: 'store' })
  })

  it('after a restart without persistence new admissions stop at the limit, and old releases free nothing of them', async () => {
    const { server, limiter } = await started()
    const concurrency = limiter(2)
    const before = [await concurrency.acquire('k'), await concurrency.acquire('k')]
    expect(before.map((slot) => slot.allowed)).toEqual([true, true])
    await server.kill('SIGKILL')
    await before[0]!.release() // fails; retried once Redis answers, on a lease set that no longer has it
    await server.restart()
    // The lease set is gone: the two requests admitted before keep running, and 2 more are admitted, not 3.
    const first = await acquireOnceBack(concurrency, 'k')
    const after = [first, await concurrency.acquire('k'), await concurrency.acquire('k')]
    expect(after.map((slot) => [slot.allowed, slot.source])).toEqual([
      [true, 'store'],
      [true, 'store'],
      [false, 'store'],
    ])
    // An old lease's release (of an id the new set never held) frees none of the new ones.
    await before[1]!.release()
    expect(await concurrency.acquire('k')).toMatchObject({ allowed: false, source: 'store', inFlight: 2 })
  })
})

describe('ConcurrencyLimiter with renew (attack round: a GraphQL operation longer than the lease lost its slot)', () => {
  const setup = (renew: boolean) => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] })
    const clock = new ManualClock(1_700_000_000_000)
    const store = new MemoryStore({ clock: clock.read })
    const limiter = new ConcurrencyLimiter({ limit: 1, lease: '4s', renew, store, prefix: uniquePrefix() })
    /** Both clocks move: the store's and the limiter's timers. */
    const pass = async (ms: number) => {
      for (let step = 0; step < ms; step += 500) {
        clock.advance(500)
        await vi.advanceTimersByTimeAsync(500)
      }
    }
    return { limiter, pass }
  }
  afterAll(() => vi.useRealTimers())

  it('a slot held for five leases is still held: a second request of the key is refused, then admitted once released', async () => {
    const { limiter, pass } = setup(true)
    const slot = await limiter.acquire('k')
    expect(slot.allowed).toBe(true)
    await pass(20_000)
    expect((await limiter.acquire('k')).allowed).toBe(false)
    await slot.release()
    const next = await limiter.acquire('k')
    expect(next.allowed).toBe(true)
    await next.release()
    vi.useRealTimers()
  })

  it('without renew, the slot runs out with its lease, as before', async () => {
    const { limiter, pass } = setup(false)
    expect((await limiter.acquire('k')).allowed).toBe(true)
    await pass(4_000)
    expect((await limiter.acquire('k')).allowed).toBe(true)
    vi.useRealTimers()
  })

  it('a released slot is not renewed again: its place is free for good', async () => {
    const { limiter, pass } = setup(true)
    const slot = await limiter.acquire('k')
    await pass(2_500)
    await slot.release()
    await pass(10_000)
    const other = await limiter.acquire('k')
    expect(other.allowed).toBe(true)
    await other.release()
    vi.useRealTimers()
  })

  it('refuses a renew that is not true or false, naming it', () => {
    expect(() => new ConcurrencyLimiter({ limit: 1, renew: 'yes' as unknown as boolean })).toThrow(/renew/)
  })
})

describe.each([
  ['standalone', () => standaloneClient()],
  ['Cluster', () => clusterClient()],
] as const)('the lease script on %s reads the lease sets 41bbd39 wrote', (_topology, makeClient) => {
  it('a sorted set of lease ids scored by their expiry (ms), expiring with its latest: held ones count, expired ones go', async () => {
    const client = makeClient()
    const clock = new ManualClock(1_700_000_000_000)
    const store = new RedisStore({ client, clock: clock.read })
    const prefix = uniquePrefix()
    const key = store.leaseKeyFor(prefix, 'k')
    // As the previous script left it: one lease held 5 s more, one expired a second ago.
    await client.zadd(key, clock.read() + 5_000, 'held', clock.read() - 1_000, 'expired')
    await client.pexpire(key, 5_000)
    const lease = (id: string, limit: number) =>
      store.acquire({ prefix, key: 'k', id, limit, leaseMs: 10_000 })
    expect(await lease('new', 2)).toMatchObject({ allowed: true, inFlight: 2, nextExpiry: 5_000 })
    expect(await lease('third', 2)).toMatchObject({ allowed: false, inFlight: 2 })
    // The lease the previous script granted is renewed by its id like any other.
    expect(await lease('held', 2)).toMatchObject({ allowed: true, inFlight: 2, nextExpiry: 10_000 })
  })
})
