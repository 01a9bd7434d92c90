import { type ClientState, firstReady, hasEvents } from './first-ready.js'
import type { RedisScriptRunner } from './runner.js'

interface ScriptOptions {
  keys: string[]
  arguments: string[]
}

/**
 * The part of a node-redis (`redis` / `@redis/client` 5 or 6) client or cluster the store uses. Structural:
 * core never imports node-redis. A cluster routes EVALSHA and EVAL by their first key.
 */
export interface NodeRedisLike {
  evalSha(sha1: string, options: ScriptOptions): Promise<unknown>
  eval(lua: string, options: ScriptOptions): Promise<unknown>
  del(keys: string[]): Promise<unknown>
  sendCommand(...args: never[]): Promise<unknown>
  /** A cluster's slot table (node-redis 5 and 6): for each slot, its shard, whose `master.address` is `host:port`. */
  readonly slots?: unknown
  /** Whether `connect()` was called and the client not closed since, and whether it is connected. */
  readonly isOpen?: boolean
  readonly isReady?: boolean
}

/**
 * The events after which a node-redis client may be ready (a client's `'ready'`, a cluster's `'connect'`) or
 * closed (a client's `'end'`, a cluster's `'disconnect'`).
 */
const STATE_EVENTS = ['ready', 'connect', 'end', 'disconnect']

/** True for a node-redis client or cluster: camel-case `evalSha` beside `sendCommand`. */
export function isNodeRedisClient(client: unknown): client is NodeRedisLike {
  const candidate = client as Partial<Record<keyof NodeRedisLike, unknown>> | null | undefined
  return typeof candidate?.evalSha === 'function' && typeof candidate.sendCommand === 'function'
}

/**
 * Runs the store's scripts on a node-redis client (`createClient`) or cluster (`createCluster`).
 * NOTE: node-redis' own `scripts` option is not used: it loads a script on the first node it reaches only, where
 * EVAL on NOSCRIPT loads it on the very node that owns the key.
 */
export function nodeRedisRunner(client: NodeRedisLike): RedisScriptRunner {
  const cluster = client as unknown as Record<string, unknown>
  return {
    family: 'node-redis',
    cluster: typeof cluster.getSlotRandomNode === 'function' || typeof cluster.getMasters === 'function',
    evalSha: (sha1, keys, args) => client.evalSha(sha1, { keys: [...keys], arguments: [...args] }),
    eval: (lua, keys, args) => client.eval(lua, { keys: [...keys], arguments: [...args] }),
    del: (keys) => client.del([...keys]),
    nodeOf: (slot) => {
      const shard = Array.isArray(client.slots)
        ? (client.slots[slot] as { master?: { address?: unknown } })
        : undefined
      const address = shard?.master?.address
      return typeof address === 'string' ? address : undefined
    },
    // Held from `connect()` until it is ready (a cluster refuses commands until then, a client queues them). A
    // client never told to connect is not held: it refuses its calls at once, as before.
    whenReady: hasEvents(client) ? firstReady(client, () => stateOf(client), STATE_EVENTS) : undefined,
  }
}

/** Where a node-redis client or cluster stands (no `isReady`: a client of another shape, taken as ready). */
function stateOf(client: NodeRedisLike): ClientState {
  if (client.isReady === undefined || client.isReady) return 'ready'
  return client.isOpen === true ? 'connecting' : 'closed'
}
