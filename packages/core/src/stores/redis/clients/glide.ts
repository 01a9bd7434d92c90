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

/** True for a GLIDE client: `customCommand` beside `invokeScript`. */
export function isGlideClient(client: unknown): client is GlideLike {
  const candidate = client as Partial<Record<keyof GlideLike, unknown>> | null | undefined
  return typeof candidate?.customCommand === 'function' && typeof candidate.invokeScript === 'function'
}

/** Runs the store's scripts on a Valkey GLIDE `GlideClient` or `GlideClusterClient`. */
export function glideRunner(client: GlideLike): RedisScriptRunner {
  const command = (name: string, script: string, keys: readonly string[], args: readonly string[]) =>
    client.customCommand([name, script, String(keys.length), ...keys, ...args])
  return {
    family: 'valkey-glide',
    cluster: typeof (client as unknown as Record<string, unknown>).invokeScriptWithRoute === 'function',
    evalSha: (sha1, keys, args) => command('EVALSHA', sha1, keys, args),
    eval: (lua, keys, args) => command('EVAL', lua, keys, args),
    del: (keys) => client.del([...keys]),
  }
}
