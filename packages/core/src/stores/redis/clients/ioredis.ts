import { type ClientState, firstReady, hasEvents } from './first-ready.js'
import type { RedisScriptRunner } from './runner.js'

/**
 * The part of an ioredis 5/6 or iovalkey `Redis` or `Cluster` client the store uses. Structural: core never
 * imports ioredis. A Cluster routes EVALSHA and EVAL by their first key.
 */
export interface IoredisLike {
  evalsha(sha1: string, numberOfKeys: number, ...keysAndArgs: string[]): Promise<unknown>
  eval(lua: string, numberOfKeys: number, ...keysAndArgs: string[]): Promise<unknown>
  del(...keys: string[]): Promise<number>
  defineCommand(name: string, definition: { lua: string; numberOfKeys?: number }): void
  readonly isCluster?: boolean
  /** A Cluster's slot table: for each slot, the `host:port` of its master first. */
  readonly slots?: unknown
  /** `'wait'` (lazyConnect), `'connecting'`, `'connect'`, `'ready'`, `'reconnecting'`, `'close'`, `'end'`, ... */
  readonly status?: string
  connect?(): Promise<void>
}

/**
 * The states of a client that has not connected yet and is trying to (or waits for a first command to). `'close'`
 * and `'disconnecting'` pass on the way to `'reconnecting'` after a failed attempt (or to `'end'`).
 */
const CONNECTING = new Set(['wait', 'connecting', 'connect', 'reconnecting', 'close', 'disconnecting'])
/** The events after which an ioredis client is no longer connecting: ready, or given up. */
const STATE_EVENTS = ['ready', 'end']

/** The part of a `net.Socket` that `together` uses. */
interface Corkable {
  cork(): void
  uncork(): void
}

/** True for an ioredis or iovalkey client: `defineCommand` and lower-case `evalsha` are theirs alone. */
export function isIoredisClient(client: unknown): client is IoredisLike {
  const candidate = client as Partial<Record<keyof IoredisLike, unknown>> | null | undefined
  return typeof candidate?.evalsha === 'function' && typeof candidate.defineCommand === 'function'
}

/** Runs the store's scripts on an ioredis 5/6 or iovalkey `Redis` or `Cluster` client. */
export function ioredisRunner(client: IoredisLike): RedisScriptRunner {
  const cluster = client.isCluster === true
  const nodeOf = (slot: number) => {
    const owner = Array.isArray(client.slots) ? (client.slots[slot] as unknown[] | undefined)?.[0] : undefined
    return typeof owner === 'string' ? owner : undefined
  }
  /**
   * The socket that carries commands for `slot`, when the client has it open: a standalone client's `stream`; on a
   * Cluster, the `stream` of the node's client in its connection pool (not in ioredis's public types: read with
   * care, and without it the commands go out one by one, as before).
   */
  const connectionOf = (slot: number): Corkable | undefined => {
    let owner: unknown = client
    if (cluster) {
      const node = nodeOf(slot)
      const pool = (client as { connectionPool?: { getInstanceByKey?: (key: string) => unknown } })
        .connectionPool
      owner = node === undefined ? undefined : pool?.getInstanceByKey?.(node)
    }
    const stream = (owner as { stream?: Partial<Corkable> } | undefined)?.stream
    return typeof stream?.cork === 'function' && typeof stream.uncork === 'function'
      ? (stream as Corkable)
      : undefined
  }
  return {
    family: 'ioredis',
    cluster,
    evalSha: (sha1, keys, args) => client.evalsha(sha1, keys.length, ...keys, ...args),
    eval: (lua, keys, args) => client.eval(lua, keys.length, ...keys, ...args),
    del: (keys) => client.del(...keys),
    nodeOf,
    // Held while it makes its first connection (a Cluster then learns its slot table).
    whenReady: hasEvents(client)
      ? firstReady(
          client,
          () => stateOf(client.status),
          STATE_EVENTS,
          () => {
            // A lazyConnect client connects on its first command, which it does not get while we wait.
            if (client.status === 'wait') client.connect?.().catch(() => {})
          },
        )
      : undefined,
    // ioredis writes each command to its socket as it is made: corked, the commands of `send` go in one write.
    together: (slot, send) => {
      const stream = connectionOf(slot)
      if (stream === undefined) return send()
      stream.cork()
      try {
        send()
      } finally {
        stream.uncork()
      }
    },
  }
}

/** Where an ioredis client stands, from its `status` (no status: a client of another shape, taken as ready). */
function stateOf(status: string | undefined): ClientState {
  if (status === undefined || status === 'ready') return 'ready'
  return CONNECTING.has(status) ? 'connecting' : 'closed'
}
