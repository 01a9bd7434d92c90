/**
 * DurableObjectStore and RateLimiterObject in Node, without workerd: options refused at construction with the
 * option named, calls of one turn batched into one request per object, an object's failure answered by the
 * limiter's failure policy, and the alarm's sweep of expired state. (Decisions themselves run in workerd:
 * conformance.test.ts.)
 */
import { createHash } from 'node:crypto'
import {
  type DurableObjectNamespaceLike,
  type DurableObjectStorageLike,
  DurableObjectStore,
  RateLimiterObject,
} from '@ratewindow/cloudflare'
import { fixedWindow, RateLimiter } from '@ratewindow/core'
import { describe, expect, it } from 'vitest'

/** A storage in memory, copying values in and out as a Durable Object's storage does. */
function memoryStorage(): DurableObjectStorageLike & { data: Map<string, unknown>; alarm: number | null } {
  const data = new Map<string, unknown>()
  const storage = {
    data,
    alarm: null as number | null,
    get: async (key: string) => structuredClone(data.get(key)),
    put: async (key: string, value: unknown) => void data.set(key, structuredClone(value)),
    delete: async (key: string) => data.delete(key),
    list: async ({
      prefix = '',
      startAfter,
      limit = Number.POSITIVE_INFINITY,
    }: {
      prefix?: string
      startAfter?: string
      limit?: number
    }) =>
      new Map(
        [...data]
          .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
          .filter(([key]) => key.startsWith(prefix) && (startAfter === undefined || key > startAfter))
          .slice(0, limit),
      ),
    getAlarm: async () => storage.alarm,
    setAlarm: async (time: number) => {
      storage.alarm = time
    },
  }
  return storage
}

/** A namespace of objects in this process, counting the requests each receives. */
function localNamespace() {
  const objects = new Map<string, { object: RateLimiterObject; storage: ReturnType<typeof memoryStorage> }>()
  const requests: string[] = []
  const namespace: DurableObjectNamespaceLike<string> = {
    idFromName: (name) => name,
    get: (id) => ({
      fetch: async (url, init) => {
        requests.push(id)
        let entry = objects.get(id)
        if (entry === undefined) {
          const storage = memoryStorage()
          entry = { object: new RateLimiterObject({ storage }), storage }
          objects.set(id, entry)
        }
        return entry.object.fetch(new Request(url, init))
      },
    }),
  }
  return { namespace, objects, requests }
}

describe('DurableObjectStore options', () => {
  const { namespace } = localNamespace()
  it.each([
    ['namespace', { namespace: {} }],
    ['namespace', {}],
    ['objects', { namespace, objects: 0 }],
    ['objects', { namespace, objects: 1.5 }],
    ['objects', { namespace, objects: 2000 }],
    ['name', { namespace, name: '' }],
    ['clock', { namespace, clock: 5 }],
  ])('refuses a bad `%s` at construction, naming it', (option, options) => {
    expect(() => new DurableObjectStore(options as never)).toThrow(
      expect.objectContaining({ code: 'ERR_RATEWINDOW_INVALID_OPTION', option }),
    )
  })

  it('refuses unknown options, naming them', () => {
    expect(() => new DurableObjectStore({ namespace, shards: 4 } as never)).toThrow(/shards/)
  })
})

describe('DurableObjectStore calls', () => {
  it('sends the calls of one turn for one object in one request, and spreads keys over the objects', async () => {
    const { namespace, requests } = localNamespace()
    const store = new DurableObjectStore({ namespace, objects: 4 })
    const limiter = new RateLimiter({ rules: fixedWindow({ limit: 100, window: '1m' }), store })
    const keys = Array.from({ length: 40 }, (_, i) => `client-${i}`)
    const results = await Promise.all(keys.map((key) => limiter.limit(key)))
    expect(results.every((result) => result.allowed && result.remaining === 99)).toBe(true)
    // 40 decisions in one turn: one request per object used, and more than one object used.
    expect(requests.length).toBe(new Set(requests).size)
    expect(new Set(requests).size).toBeGreaterThan(1)
    expect(new Set(keys.map((key) => store.scopeOf({ prefix: 'rw', key }))).size).toBe(requests.length)
  })

  it('no identifier reaches the state of a long one by spelling its hashed form (regression: `#<sha256>` was an alias)', async () => {
    const { namespace } = localNamespace()
    // One object: the alias and the identifier it imitates meet in the same storage.
    const store = new DurableObjectStore({ namespace, objects: 1 })
    const limiter = new RateLimiter({ rules: fixedWindow({ limit: 3, window: '1m' }), store })
    const victim = `user:${'v'.repeat(200)}`
    const alias = `#${createHash('sha256').update(victim).digest('base64url')}`
    for (let i = 0; i < 3; i++) expect((await limiter.limit(alias)).allowed).toBe(true)
    expect((await limiter.limit(alias)).allowed).toBe(false)
    expect((await limiter.limit(victim)).remaining).toBe(2)
  })

  it('an object that fails rejects with ERR_RATEWINDOW_STORE, and the limiter answers by its failure policy', async () => {
    const errors: unknown[] = []
    const namespace: DurableObjectNamespaceLike<string> = {
      idFromName: (name) => name,
      get: () => ({ fetch: async () => ({ ok: false, status: 500, text: async () => 'exceeded CPU' }) }),
    }
    const store = new DurableObjectStore({ namespace })
    await expect(
      store.consume({ prefix: 'p', key: 'k', rules: [fixedWindow({ limit: 1, window: '1s' })], cost: 1 }),
    ).rejects.toMatchObject({
      code: 'ERR_RATEWINDOW_STORE',
      message: expect.stringContaining('exceeded CPU'),
    })
    const limiter = new RateLimiter({
      rules: fixedWindow({ limit: 1, window: '1s' }),
      store,
      onError: (error) => void errors.push(error),
    })
    expect(await limiter.limit('k')).toMatchObject({ allowed: true, source: 'policy' })
    expect(errors).toHaveLength(1)
  })

  it("a turn's calls go 100 to a request, one request after another; behind a request that never answers, none waits past the timeout", async () => {
    const { namespace, requests } = localNamespace()
    const store = new DurableObjectStore({ namespace, objects: 1 })
    const limiter = new RateLimiter({ rules: fixedWindow({ limit: 1000, window: '1m' }), store })
    const results = await Promise.all(Array.from({ length: 250 }, () => limiter.limit('k')))
    expect(results.filter((result) => result.allowed && result.source === 'store')).toHaveLength(250)
    expect(requests).toHaveLength(3)

    // The first request of a turn stalls (an object that never answers): its calls time out, and the 150 behind it
    // are answered with the same failure at once, by the failure policy, instead of waiting on it.
    const stalled: DurableObjectNamespaceLike<string> = {
      idFromName: (name) => name,
      get: () => ({ fetch: () => new Promise<never>(() => {}) }),
    }
    const errors: unknown[] = []
    const late = new RateLimiter({
      rules: fixedWindow({ limit: 1000, window: '1m' }),
      store: new DurableObjectStore({ namespace: stalled, objects: 1 }),
      timeout: '100ms',
      onError: (error) => void errors.push(error),
    })
    const answered = await Promise.all(Array.from({ length: 250 }, () => late.limit('k')))
    expect(new Set(answered.map((result) => result.source))).toEqual(new Set(['policy']))
    expect(errors.length).toBeGreaterThan(0)
  })

  it('a namespace function that throws is a store failure too, not a crash', async () => {
    const store = new DurableObjectStore({
      namespace: () => {
        throw new Error('no binding yet')
      },
    })
    const limiter = new RateLimiter({
      rules: fixedWindow({ limit: 1, window: '1s' }),
      store,
      onError: () => {},
    })
    expect(await limiter.limit('k')).toMatchObject({ allowed: true, source: 'policy' })
  })
})

describe('RateLimiterObject', () => {
  it('answers an unreadable request with 400', async () => {
    const object = new RateLimiterObject({ storage: memoryStorage() })
    const response = await object.fetch(new Request('https://x/', { method: 'POST', body: '{' }))
    expect(response.status).toBe(400)
  })

  it('arms one sweep alarm; the sweep deletes expired state and keeps the rest', async () => {
    const { namespace, objects } = localNamespace()
    const store = new DurableObjectStore({ namespace, objects: 1 })
    const short = new RateLimiter({ rules: fixedWindow({ limit: 5, window: '1s' }), store, prefix: 'short' })
    const long = new RateLimiter({ rules: fixedWindow({ limit: 5, window: '1h' }), store, prefix: 'long' })
    await short.limit('a')
    await long.limit('b')
    const { object, storage } = [...objects.values()][0]!
    expect(storage.alarm).toBeGreaterThan(Date.now())
    expect(storage.data.size).toBe(2)
    // Mark the short window's state as expired, as it is once its second has passed.
    for (const [key, value] of storage.data)
      if (key.includes('short')) storage.data.set(key, { ...(value as object), expiresAt: Date.now() - 1 })
    storage.alarm = null
    await object.alarm()
    expect([...storage.data.keys()].map((key) => key.includes('long'))).toEqual([true])
    expect(storage.alarm).not.toBeNull() // something is left: the sweep comes back
  })
})

describe('DurableObjectStore overrides', () => {
  const rules = fixedWindow({ limit: 2, window: '1m' })

  it('a decision reads the override record in the fetch that decides: one request per decision, none more', async () => {
    const { namespace, requests } = localNamespace()
    const store = new DurableObjectStore({ namespace, objects: 4 })
    const limiter = new RateLimiter({ rules, store, name: 'api', overrides: true })
    await limiter.overrides.set('k', { limit: 5 })
    requests.length = 0
    for (let i = 0; i < 5; i++) expect(await limiter.limit('k')).toMatchObject({ allowed: true, limit: 5 })
    expect(await limiter.limit('k')).toMatchObject({ allowed: false, limit: 5 })
    expect(requests).toHaveLength(6)
    // 20 decisions in one turn, an overridden key among them: still one request per object used.
    requests.length = 0
    const keys = Array.from({ length: 20 }, (_, i) => (i === 0 ? 'k' : `other-${i}`))
    await Promise.all(keys.map((key) => limiter.limit(key)))
    expect(requests.length).toBe(new Set(requests).size)
  })

  it("keeps a key's record and counters in one object, whatever the coded limits (a deploy keeps both in reach)", async () => {
    const { namespace, objects } = localNamespace()
    const store = new DurableObjectStore({ namespace, objects: 8 })
    const before = new RateLimiter({ rules, store, name: 'api', overrides: true })
    await before.overrides.block('k', { for: '1h', reason: 'abuse' })
    await before.limit('k')
    const after = new RateLimiter({
      rules: fixedWindow({ limit: 3, window: '1m' }),
      store,
      name: 'api',
      overrides: true,
    })
    expect(await after.limit('k')).toMatchObject({ allowed: false, manualBlock: { reason: 'abuse' } })
    // One object holds the record; no other object was asked anything.
    expect(objects.size).toBe(1)
  })

  it('records live in the storage: an object restarted on it keeps the block and the override', async () => {
    const { namespace, objects } = localNamespace()
    const store = new DurableObjectStore({ namespace, objects: 1 })
    const limiter = new RateLimiter({ rules, store, name: 'api', overrides: true })
    await limiter.overrides.block('blocked', { for: '1h', reason: 'abuse' })
    await limiter.overrides.set('raised', { limit: 5 })
    // The runtime evicts the object and makes a new one on the same storage.
    for (const entry of objects.values()) entry.object = new RateLimiterObject({ storage: entry.storage })
    expect(await limiter.limit('blocked')).toMatchObject({ allowed: false, manualBlock: { reason: 'abuse' } })
    expect(await limiter.limit('raised')).toMatchObject({ allowed: true, limit: 5, remaining: 4 })
  })

  it('the sweep drops ended override records and keeps the others', async () => {
    const { namespace, objects } = localNamespace()
    const store = new DurableObjectStore({ namespace, objects: 1 })
    const limiter = new RateLimiter({ rules, store, name: 'api', overrides: true })
    await limiter.overrides.set('ending', { limit: 5 }, { ttl: '1m' })
    await limiter.overrides.set('forever', { limit: 5 })
    const { object, storage } = [...objects.values()][0]!
    const records = () => [...storage.data.keys()].filter((key) => key.startsWith('o:'))
    expect(records()).toHaveLength(2)
    for (const [key, value] of storage.data)
      if (key.endsWith('ending')) storage.data.set(key, { ...(value as object), expiresAt: Date.now() - 1 })
    await object.alarm()
    expect(records()).toEqual([expect.stringMatching(/forever$/)])
  })

  it('list reads one object per page, walking them with one cursor; a cursor it did not make is refused, naming `cursor`', async () => {
    const { namespace, requests } = localNamespace()
    const store = new DurableObjectStore({ namespace, objects: 4 })
    const limiter = new RateLimiter({ rules, store, name: 'api', overrides: true })
    // One fetch per page, one object per page: an empty listing takes a page per object.
    const pages = []
    let cursor: string | undefined
    do {
      const page = await limiter.overrides.list(cursor === undefined ? {} : { cursor })
      pages.push(page.records.length)
      cursor = page.cursor
    } while (cursor !== undefined)
    expect(pages).toEqual([0, 0, 0, 0])
    expect(requests).toHaveLength(4)
    await expect(limiter.overrides.list({ cursor: 'x' })).rejects.toMatchObject({
      code: 'ERR_RATEWINDOW_INVALID_OPTION',
      option: 'cursor',
    })
  })
})

describe('DurableObjectStore overrides and reset', () => {
  it('reset clears the counters in the object that decides for the key (regression: it went to the object of the namespace)', async () => {
    const { namespace } = localNamespace()
    const store = new DurableObjectStore({ namespace, objects: 8 })
    const limiter = new RateLimiter({
      rules: fixedWindow({ limit: 1, window: '1h' }),
      store,
      name: 'api',
      overrides: true,
    })
    const keys = Array.from({ length: 8 }, (_, i) => `client-${i}`)
    for (const key of keys) await limiter.limit(key)
    for (const key of keys) await limiter.reset(key)
    const after = await Promise.all(keys.map((key) => limiter.limit(key)))
    expect(after.map((result) => result.allowed)).toEqual(keys.map(() => true))
  })
})
