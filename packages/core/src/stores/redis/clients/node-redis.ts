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
}

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
  }
}
