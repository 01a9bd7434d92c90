/**
 * What the Edge runtime cannot do, said where it happens: the default memory store counts per Edge instance (a
 * warning, at the first decision), and a Redis client over TCP cannot run there at all (a coded error, when the
 * `RedisStore` is built).
 */
import {
  RedisStore as CoreRedisStore,
  RateLimitError,
  type RedisStoreOptions,
  scriptRunnerFor,
} from '@ratewindow/core'
import { emitWarning } from '@ratewindow/core/support'

declare const EdgeRuntime: unknown

/** Whether this code runs on Next.js's Edge runtime (which defines the global `EdgeRuntime`). */
export const onEdge = (): boolean => typeof EdgeRuntime === 'string'

let warnedPerInstance = false

/**
 * On the Edge runtime, a limiter given no `store` counts in one Edge instance: warned once, at the first request
 * (like the default MemoryStore on Cloudflare Workers), not at module load. Every entry point calls it: middleware,
 * route handlers and server actions alike may run on the Edge.
 */
export function warnPerInstance(options: { store?: unknown }): void {
  if (warnedPerInstance || options.store !== undefined || !onEdge()) return
  warnedPerInstance = true
  emitWarning(
    'No `store` was given, so the default MemoryStore counts in this Edge instance only: the Edge runtime runs ' +
      'many instances (per region, and more under load), each with its own counters, so a client gets the limit ' +
      'once per instance. For one exact limit, run the middleware on the Node.js runtime with a RedisStore ' +
      "(`export const config = { runtime: 'nodejs' }`, or Next 16's proxy.ts), or on Cloudflare the Durable " +
      'Object store (docs/next.md#stores); to count per instance on purpose, pass `store: new MemoryStore()`.',
    'RATEWINDOW_PER_ISOLATE_STORE',
  )
}

/** The client families RedisStore recognises that speak to Redis over TCP: none runs on the Edge runtime. */
const TCP_FAMILIES = new Set(['ioredis', 'node-redis', 'valkey-glide'])

/**
 * Core's `RedisStore`, refused on the Edge runtime when its client speaks TCP, with the fix in the message: the
 * Edge runtime has no sockets, so the client could never connect and every decision would fall to the failure
 * policy. A `RedisScriptRunner` of your own (over HTTP, say) is accepted there.
 * NOTE: ioredis itself fails earlier, as the Edge chunk loads (its dependency redis-errors reads `process.version`,
 * which the Edge runtime lacks): no code of ours runs before that, and docs/next.md names that message.
 */
export class RedisStore extends CoreRedisStore {
  constructor(options: RedisStoreOptions) {
    if (onEdge()) refuseTcpClient((options as { client?: unknown } | undefined)?.client)
    super(options)
  }
}

function refuseTcpClient(client: unknown): void {
  const family = scriptRunnerFor(client)?.family
  if (family === undefined || !TCP_FAMILIES.has(family)) return
  throw new RateLimitError(
    'ERR_RATEWINDOW_INVALID_OPTION',
    `RedisStore: its ${family} client needs TCP sockets, which the Edge runtime does not have. Run this limiter ` +
      "on the Node.js runtime: Next 16's proxy.ts, a middleware.ts with `export const config = { runtime: " +
      "'nodejs' }` (Next 15.5), or a route handler or server action without `runtime = 'edge'`; or, on the " +
      'Edge, use a store made for it (the Durable Object store of @ratewindow/cloudflare) (docs/next.md#stores).',
    { option: 'client' },
  )
}
