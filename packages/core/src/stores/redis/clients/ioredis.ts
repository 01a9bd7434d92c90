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
  once?(event: 'ready' | 'end', listener: () => void): unknown
  removeListener?(event: 'ready' | 'end', listener: () => void): unknown
}

/** The states of a client that has not connected yet and is trying to (or waits for a first command to). */
const CONNECTING = new Set(['wait', 'connecting', 'connect', 'reconnecting'])

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
    whenReady: readiness(client),
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

/**
 * `RedisScriptRunner.whenReady` for an ioredis or iovalkey client: holds while it makes its first connection (a
 * Cluster then learns its slot table), until its `'ready'` or `'end'` event. A client that reconnects after it was
 * ready is not held: its calls go to its offline queue and are bounded by the limiter's `timeout`, as a fault is.
 */
function readiness(client: IoredisLike): () => Promise<void> | undefined {
  let ready = false
  let waiting: Promise<void> | undefined
  return () => {
    if (ready) return undefined
    const status = client.status
    if (status === 'ready' || status === undefined || typeof client.once !== 'function') {
      ready = true
      return undefined
    }
    // Closing or ended: the client answers its calls at once (its own error), as before.
    if (!CONNECTING.has(status)) return undefined
    if (waiting === undefined) {
      waiting = new Promise<void>((resolve) => {
        const settle = () => {
          client.removeListener?.('ready', settle)
          client.removeListener?.('end', settle)
          waiting = undefined
          resolve()
        }
        client.once!('ready', settle)
        client.once!('end', settle)
      })
      // A lazyConnect client connects on its first command; nothing is sent while we wait, so it is told to.
      if (status === 'wait') client.connect?.().catch(() => {})
    }
    return waiting
  }
}
