/**
 * Decisions per second through one Durable Object of @ratewindow/cloudflare, in workerd (miniflare, local,
 * no compatibility flag): a Worker makes `n` decisions with a RateLimiter on a DurableObjectStore of one object,
 * with 1 or 64 decisions in flight (the store sends the calls of one turn in one request to the object), on
 * SQLite-backed objects and on key-value ones, every case interleaved in each round.
 * The time is Node's wall clock around the Worker's whole request. Measures the built packages (pnpm build).
 * `--overrides` compares, on SQLite objects with the sliding window counter, a limiter without overrides, one with
 * `overrides: true` for keys without a record, and one whose 500 keys all have an override in force.
 * Local workerd keeps the object's storage in memory: Cloudflare's network adds its own latency and storage.
 */
import { build } from 'esbuild'
import { Miniflare } from 'miniflare'
import { argument, median, table } from './stats.js'

const WORKER = `
import { DurableObjectStore, RateLimiterObject } from '@ratewindow/cloudflare'
import { gcra, RateLimiter, slidingWindowCounter, slidingWindowLog } from '@ratewindow/core'
export { RateLimiterObject }
const RULES = {
  'sliding-window-counter': () => slidingWindowCounter({ limit: 1000, window: '1m' }),
  'sliding-window-log': () => slidingWindowLog({ limit: 100, window: '1m' }),
  gcra: () => gcra({ limit: 100, window: '1s', burst: 50 }),
}
export default {
  async fetch(request, env) {
    const url = new URL(request.url)
    const n = Number(url.searchParams.get('n'))
    const inFlight = Number(url.searchParams.get('c'))
    let requests = 0
    const binding = url.searchParams.get('backend') === 'sqlite' ? env.RATE_LIMITER_SQLITE : env.RATE_LIMITER_KV
    const namespace = {
      idFromName: (name) => binding.idFromName(name),
      get(id) {
        const stub = binding.get(id)
        return { fetch: (input, init) => (requests++, stub.fetch(input, init)) }
      },
    }
    const store = new DurableObjectStore({ namespace, objects: 1, name: url.searchParams.get('object') })
    const overrides = url.searchParams.get('overrides') ?? 'off'
    const rules = RULES[url.searchParams.get('rule')]()
    const limiter = new RateLimiter({ rules, store, timeout: '60s', name: 'bench', overrides: overrides !== 'off' })
    if (url.searchParams.has('setup')) {
      if (overrides === 'record')
        await Promise.all(Array.from({ length: 500 }, (_, i) => limiter.overrides.set('client-' + i, { limit: 2000 })))
      return Response.json({ requests: 0, allowed: 0 })
    }
    let next = 0
    let allowed = 0
    await Promise.all(
      Array.from({ length: inFlight }, async () => {
        while (next < n) {
          const i = next++
          if ((await limiter.limit('client-' + (i % 500))).allowed) allowed++
        }
      }),
    )
    return Response.json({ requests, allowed })
  },
}
`

const n = Number(argument('n') ?? 2_000)
const rounds = Number(argument('rounds') ?? 5)
const bundle = await build({
  stdin: { contents: WORKER, resolveDir: import.meta.dirname, loader: 'js' },
  bundle: true,
  format: 'esm',
  platform: 'neutral',
  target: 'es2022',
  conditions: ['workerd', 'worker', 'browser'],
  mainFields: ['browser', 'module', 'main'],
  write: false,
  logLevel: 'silent',
})
const modules = [{ type: 'ESModule' as const, path: 'worker.js', contents: bundle.outputFiles[0]!.text }]
// The storage backends of Durable Objects: SQLite (new_sqlite_classes, what the README's migration makes) and the
// older key-value one. One class has one backend, so the key-value objects belong to a second copy of the Worker.
const mf = new Miniflare({
  workers: [
    {
      name: 'bench',
      modules,
      compatibilityDate: '2025-09-01',
      durableObjects: {
        RATE_LIMITER_SQLITE: { className: 'RateLimiterObject', useSQLite: true },
        RATE_LIMITER_KV: { className: 'RateLimiterObject', scriptName: 'kv-objects' },
      },
    },
    {
      name: 'kv-objects',
      modules,
      compatibilityDate: '2025-09-01',
      durableObjects: { RATE_LIMITER: { className: 'RateLimiterObject', useSQLite: false } },
    },
  ],
})

interface Case {
  backend: string
  rule: string
  inFlight: number
  overrides: 'off' | 'on' | 'record'
  rates: number[]
  perRequest: number[]
}

let object = 0
/**
 * One round of a case: on a fresh object, or (overrides compared) on the case's own object, its records set once
 * (`setup`, before the first round).
 */
async function round(each: Case, count: number, setup = false) {
  const { backend, rule, inFlight, overrides } = each
  const name = compareOverrides ? `${backend}-${rule}-${inFlight}-${overrides}` : `o${object++}`
  const query = `n=${count}&c=${inFlight}&rule=${rule}&backend=${backend}&object=${name}&overrides=${overrides}${setup ? '&setup' : ''}`
  const started = performance.now()
  const response = await mf.dispatchFetch(`http://bench.test/?${query}`)
  const { requests } = (await response.json()) as { requests: number }
  return { seconds: (performance.now() - started) / 1000, requests }
}

// Rounds interleave every case, so that load from elsewhere on the machine falls on all of them alike.
const compareOverrides = process.argv.includes('--overrides')
const cases: Case[] = (compareOverrides ? ['sqlite'] : ['sqlite', 'kv']).flatMap((backend) =>
  (compareOverrides
    ? ['sliding-window-counter']
    : ['sliding-window-counter', 'sliding-window-log', 'gcra']
  ).flatMap((rule) =>
    [1, 64].flatMap((inFlight) =>
      (compareOverrides ? (['off', 'on', 'record'] as const) : (['off'] as const)).map((overrides) => ({
        backend,
        rule,
        inFlight,
        overrides,
        rates: [],
        perRequest: [],
      })),
    ),
  ),
)
for (const each of cases) {
  if (compareOverrides) await round(each, 0, true)
  await round(each, 500) // warm-up
}
for (let i = 0; i < rounds; i++)
  for (const each of cases) {
    const { seconds, requests } = await round(each, n)
    each.rates.push(n / seconds)
    each.perRequest.push(n / requests)
  }
const rows = cases.map((each) => [
  each.backend === 'sqlite' ? 'SQLite' : 'key-value',
  compareOverrides ? `${each.rule}, overrides ${each.overrides}` : each.rule,
  String(each.inFlight),
  Math.round(median(each.rates)).toLocaleString('en-US'),
  `${Math.round(Math.min(...each.rates)).toLocaleString('en-US')}–${Math.round(Math.max(...each.rates)).toLocaleString('en-US')}`,
  median(each.perRequest).toFixed(1),
])
await mf.dispose()
console.log(
  `${n.toLocaleString('en-US')} decisions per round, median of ${rounds} rounds, one object, local workerd`,
)
console.log(
  table(
    ['storage', 'rule', 'in flight', 'decisions/s (median)', 'range', 'decisions per request to the object'],
    rows,
  ),
)
