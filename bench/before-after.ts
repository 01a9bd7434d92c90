/**
 * Before/after for profile-driven changes, in one process: the current build of @ratewindow/core against an
 * earlier build given by path. Prints ns per operation (medians of 7 rounds, alternating between the two builds)
 * and the ratio; on the RedisStore path, Node CPU ns per decision (a local redis-server started here).
 *
 *   git worktree add ../rw-before <commit> && (cd ../rw-before && pnpm install && pnpm build)
 *   pnpm --filter @ratewindow/bench before-after -- --before ../rw-before/packages/core/dist/index.js
 *   [--rounds 7] [--only RedisStore]
 */
import { existsSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import * as afterRoot from '@ratewindow/core'
import * as afterAdapter from '@ratewindow/core/adapter'
import { Redis } from 'ioredis'
import { RedisServer } from '../test/support/redis-server.js'
import { argument, median, table } from './stats.js'

/** The root entry with the adapter kit beside it (one export list before the kits had entries of their own). */
type Core = typeof afterRoot & typeof afterAdapter
const after: Core = { ...afterRoot, ...afterAdapter }
const beforePath = argument('before')
if (beforePath === undefined)
  throw new Error('usage: before-after.ts --before <path to an earlier dist/index.js>')
const load = async (path: string) => (await import(pathToFileURL(path).href)) as Partial<Core>
const beforeIndex = resolve(process.cwd(), beforePath)
const beforeAdapter = join(dirname(beforeIndex), 'adapter.js')
const before = {
  ...(await load(beforeIndex)),
  ...(existsSync(beforeAdapter) ? await load(beforeAdapter) : {}),
} as Core

const binding = {
  name: 'bench',
  clientIp: (r: { ip: string }) => r.ip,
  untrustedForwardedFor: () => false,
  trustProxyHint: '',
}

/** One round: ns per call of `run`, awaited only when it returns a promise (as the adapters do). */
const nsPerOp =
  (operations: number, run: (i: number) => unknown): Round =>
  async () => {
    const start = process.hrtime.bigint()
    for (let i = 0; i < operations; i++) {
      const value = run(i)
      if (value instanceof Promise) await value
    }
    return Number(process.hrtime.bigint() - start) / operations
  }

/**
 * One round: Node CPU ns per call of `run` (user + system, `process.cpuUsage`), `inFlight` calls at a time: for
 * paths that wait on a server, where wall time is the server's.
 */
const cpuNsPerOp =
  (operations: number, inFlight: number, run: (i: number) => Promise<unknown>): Round =>
  async () => {
    let next = 0
    const start = process.cpuUsage()
    await Promise.all(
      Array.from({ length: inFlight }, async () => {
        while (next < operations) await run(next++)
      }),
    )
    const { user, system } = process.cpuUsage(start)
    return ((user + system) * 1000) / operations
  }

type Round = () => Promise<number>
const ROUNDS = Number(argument('rounds') ?? 7)
/** `--only <text>`: the cases whose name contains it. */
const only = argument('only')

/** A local redis-server for the RedisStore case, started when that case runs. */
let redis: { server: RedisServer; client: Redis } | undefined
async function redisClient(): Promise<Redis> {
  if (redis === undefined) {
    const server = await RedisServer.start()
    redis = { server, client: new Redis(server.port, '127.0.0.1') }
  }
  return redis.client
}

const cases: [string, (core: Core) => Round | Promise<Round>][] = [
  [
    'HTTP engine on RedisStore (ioredis), 50 in flight: Node CPU per decision',
    async (core) => {
      // One prefix per build: the two never share counters.
      const engine = new core.HttpRateLimiter(
        {
          limit: 100_000_000,
          headers: 'draft-7',
          store: new core.RedisStore({ client: await redisClient() }),
          prefix: core === before ? 'before' : 'after',
        },
        binding,
      )
      const requests = Array.from({ length: 1000 }, (_, i) => ({ ip: `10.0.${i >> 8}.${i & 255}` }))
      return cpuNsPerOp(50_000, 50, (i) => engine.decide(requests[i % requests.length]!))
    },
  ],
  [
    'HTTP engine decide(), 1 client',
    (core) => {
      const engine = new core.HttpRateLimiter({ limit: 100_000_000 }, binding)
      return nsPerOp(200_000, () => engine.decide({ ip: '10.0.0.1' }))
    },
  ],
  ...[1, 10_000].map((clients): [string, (core: Core) => Round] => [
    `HTTP engine as the adapters call it (decideNow, else decide), draft-7, ${clients.toLocaleString('en-US')} client${clients > 1 ? 's' : ''}`,
    (core) => {
      const engine = new core.HttpRateLimiter(
        { limit: 100_000_000, headers: 'draft-7', store: new core.MemoryStore({ maxKeys: 1_000_000 }) },
        binding,
      )
      const requests = Array.from({ length: clients }, (_, i) => ({
        ip: `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`,
      }))
      const adapterCall = (engine as { decideNow?: (request: { ip: string }) => unknown }).decideNow
      const decide = adapterCall
        ? adapterCall.bind(engine)
        : (request: { ip: string }) => engine.decide(request)
      return nsPerOp(300_000, (i) => decide(requests[i % clients]!))
    },
  ]),
  [
    'limiter.limit(), 100k clients',
    (core) => {
      const limiter = new core.RateLimiter({
        rules: core.slidingWindowCounter({ limit: 1_000, window: '1m' }),
      })
      const keys = Array.from({ length: 100_000 }, (_, i) => `client-${i}`)
      return nsPerOp(200_000, (i) => limiter.limit(keys[i % keys.length]!))
    },
  ],
  [
    'flood of distinct keys past maxKeys (100k)',
    (core) => {
      const limiter = new core.RateLimiter({
        rules: core.slidingWindowCounter({ limit: 1_000, window: '1m' }),
        store: new core.MemoryStore({ maxKeys: 100_000 }),
      })
      let next = 0
      return nsPerOp(100_000, () => limiter.limit(`attacker-${next++}`))
    },
  ],
]

const rows: string[][] = []
for (const [name, run] of cases) {
  if (only !== undefined && !name.includes(only)) continue
  // Rounds alternate between the two builds, after one warm-up round each: a drift of the machine's speed
  // weighs on both alike.
  const rounds = [await run(before), await run(after)]
  for (const round of rounds) await round()
  const samples: [number[], number[]] = [[], []]
  for (let i = 0; i < ROUNDS; i++) for (const [j, round] of rounds.entries()) samples[j]!.push(await round())
  const [old, now] = samples.map(median) as [number, number]
  rows.push([name, old.toFixed(0), now.toFixed(0), (old / now).toFixed(2)])
}
if (redis !== undefined) {
  redis.client.disconnect()
  await redis.server.stop()
}
console.log(table(['operation', 'before (ns/op)', 'after (ns/op)', 'speed-up'], rows))
