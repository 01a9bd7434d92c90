import type { RedisScriptRunner } from './runner.js'

/**
 * The part of a Valkey GLIDE (`@valkey/valkey-glide` 2) `GlideClient` or `GlideClusterClient` the store uses.
 * Structural: core never imports GLIDE (its `Script` class lives in the native module, so scripts go through
 * `customCommand`, which a cluster client routes by the command's first key).
 */
export interface GlideLike {
  customCommand(args: string[]): Promise<unknown>
  invokeScript(...args: never[]): Promise<unknown>
  del(keys: string[]): Promise<number>
}

/**
 * Calls RedisStore keeps in flight on a GLIDE client at once (fewer if its `inflightRequestsLimit`, 1,000 by
 * default, is lower). GLIDE times a request from the moment it is made (`requestTimeout`, 250 ms by default),
 * however long it waits behind the others, and on a Cluster the store groups GLIDE's calls per hash slot (GLIDE does
 * not say which node serves a slot), each with its own clock: few calls in flight keep that wait short (with many
 * in flight, a flood right after connecting was partly answered by the failure policy: GLIDE's timeouts and ours).
 */
const GLIDE_CALLS_IN_FLIGHT = 128

/** True for a GLIDE client: `customCommand` beside `invokeScript`. */
export function isGlideClient(client: unknown): client is GlideLike {
  const candidate = client as Partial<Record<keyof GlideLike, unknown>> | null | undefined
  return typeof candidate?.customCommand === 'function' && typeof candidate.invokeScript === 'function'
}

/** Runs the store's scripts on a Valkey GLIDE `GlideClient` or `GlideClusterClient`. */
export function glideRunner(client: GlideLike): RedisScriptRunner {
  const command = (name: string, script: string, keys: readonly string[], args: readonly string[]) =>
    client.customCommand([name, script, String(keys.length), ...keys, ...args])
  // GLIDE refuses a request past `inflightRequestsLimit` in flight (not in its public types: read with care).
  const limit = (client as { inflightRequestsLimit?: unknown }).inflightRequestsLimit
  return {
    family: 'valkey-glide',
    maxInFlight:
      typeof limit === 'number' && Number.isSafeInteger(limit) && limit > 0
        ? Math.min(limit, GLIDE_CALLS_IN_FLIGHT)
        : GLIDE_CALLS_IN_FLIGHT,
    cluster: typeof (client as unknown as Record<string, unknown>).invokeScriptWithRoute === 'function',
    evalSha: (sha1, keys, args) => command('EVALSHA', sha1, keys, args),
    eval: (lua, keys, args) => command('EVAL', lua, keys, args),
    del: (keys) => client.del([...keys]),
  }
}
