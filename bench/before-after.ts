/**
 * Before/after for profile-driven changes, in one process: the current build of @ratewindow/core against an
 * earlier build given by path. Prints ns per operation (medians of 5 rounds) and the ratio.
 *
 *   git worktree add ../rw-before <commit> && (cd ../rw-before && pnpm install && pnpm build)
 *   pnpm --filter @ratewindow/bench before-after -- --before ../rw-before/packages/core/dist/index.js
 */
import { resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import * as after from '@ratewindow/core'
import { median, table } from './stats.js'

type Core = typeof after
const index = process.argv.indexOf('--before')
if (index < 0) throw new Error('usage: before-after.ts --before <path to an earlier dist/index.js>')
const before = (await import(pathToFileURL(resolve(process.cwd(), process.argv[index + 1]!)).href)) as Core

const binding = {
  name: 'bench',
  clientIp: (r: { ip: string }) => r.ip,
  untrustedForwardedFor: () => false,
  trustProxyHint: '',
}

/** ns per call of `run`, awaited only when it returns a promise (as the adapters do). */
async function nsPerOp(operations: number, run: (i: number) => unknown): Promise<number> {
  const samples: number[] = []
  for (let round = 0; round < 6; round++) {
    const start = process.hrtime.bigint()
    for (let i = 0; i < operations; i++) {
      const value = run(i)
      if (value instanceof Promise) await value
    }
    if (round > 0) samples.push(Number(process.hrtime.bigint() - start) / operations)
  }
  return median(samples)
}

const cases: [string, (core: Core) => Promise<number>][] = [
  [
    'HTTP engine decide(), 1 client',
    (core) => {
      const engine = new core.HttpRateLimiter({ limit: 100_000_000 }, binding)
      return nsPerOp(200_000, () => engine.decide({ ip: '10.0.0.1' }))
    },
  ],
  ...[1, 10_000].map((clients): [string, (core: Core) => Promise<number>] => [
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
    async (core) => {
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
  const old = await run(before)
  const now = await run(after)
  rows.push([name, old.toFixed(0), now.toFixed(0), (old / now).toFixed(2)])
}
console.log(table(['operation', 'before (ns/op)', 'after (ns/op)', 'speed-up'], rows))
