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
}

/** True for an ioredis or iovalkey client: `defineCommand` and lower-case `evalsha` are theirs alone. */
export function isIoredisClient(client: unknown): client is IoredisLike {
  const candidate = client as Partial<Record<keyof IoredisLike, unknown>> | null | undefined
  return typeof candidate?.evalsha === 'function' && typeof candidate.defineCommand === 'function'
}

/** Runs the store's scripts on an ioredis 5/6 or iovalkey `Redis` or `Cluster` client. */
export function ioredisRunner(client: IoredisLike): RedisScriptRunner {
  return {
    family: 'ioredis',
    cluster: client.isCluster === true,
    evalSha: (sha1, keys, args) => client.evalsha(sha1, keys.length, ...keys, ...args),
    eval: (lua, keys, args) => client.eval(lua, keys.length, ...keys, ...args),
    del: (keys) => client.del(...keys),
    nodeOf: (slot) => {
      const owner = Array.isArray(client.slots)
        ? (client.slots[slot] as unknown[] | undefined)?.[0]
        : undefined
      return typeof owner === 'string' ? owner : undefined
    },
  }
}
