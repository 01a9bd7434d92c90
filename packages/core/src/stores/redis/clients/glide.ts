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

/** GLIDE's default `inflightRequestsLimit`. */
const GLIDE_INFLIGHT_LIMIT = 1_000

/** True for a GLIDE client: `customCommand` beside `invokeScript`. */
export function isGlideClient(client: unknown): client is GlideLike {
  const candidate = client as Partial<Record<keyof GlideLike, unknown>> | null | undefined
  return typeof candidate?.customCommand === 'function' && typeof candidate.invokeScript === 'function'
}

/** Runs the store's scripts on a Valkey GLIDE `GlideClient` or `GlideClusterClient`. */
export function glideRunner(client: GlideLike): RedisScriptRunner {
  const command = (name: string, script: string, keys: readonly string[], args: readonly string[]) =>
    client.customCommand([name, script, String(keys.length), ...keys, ...args])
  // GLIDE refuses a request past this many in flight ("Reached maximum inflight requests"): a flood over many hash
  // slots would otherwise send more calls at once. Not in GLIDE's public types: read with care.
  const limit = (client as { inflightRequestsLimit?: unknown }).inflightRequestsLimit
  return {
    family: 'valkey-glide',
    maxInFlight:
      typeof limit === 'number' && Number.isSafeInteger(limit) && limit > 0 ? limit : GLIDE_INFLIGHT_LIMIT,
    cluster: typeof (client as unknown as Record<string, unknown>).invokeScriptWithRoute === 'function',
    evalSha: (sha1, keys, args) => command('EVALSHA', sha1, keys, args),
    eval: (lua, keys, args) => command('EVAL', lua, keys, args),
    del: (keys) => client.del([...keys]),
  }
}
