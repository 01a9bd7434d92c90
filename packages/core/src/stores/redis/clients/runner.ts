/**
 * The script-runner contract: the three commands RedisStore sends, whatever the client. One adapter per client
 * family (ioredis.ts, node-redis.ts, glide.ts) maps it onto that client's API; none imports its client library,
 * so core has no dependency on any of them. Another client fits by implementing `RedisScriptRunner`.
 */

/** Runs the store's scripts on one Redis client. Every call addresses keys of one hash slot. */
export interface RedisScriptRunner {
  /** The client family, shown in error messages: `'ioredis'`, `'node-redis'`, `'valkey-glide'` or your own. */
  readonly family: string
  /** True for a Cluster client: keys then route to the master owning their slot. */
  readonly cluster: boolean
  /**
   * `EVALSHA sha1 keys.length ...keys ...args`, on the node owning `keys[0]`. Rejects with the server's error,
   * whose message holds `NOSCRIPT` when that node lacks the script; must never resend a command on its own
   * after a timeout or a dropped connection (the script may have run: a second run counts twice).
   */
  evalSha(sha1: string, keys: readonly string[], args: readonly string[]): Promise<unknown>
  /** `EVAL lua keys.length ...keys ...args` on the node owning `keys[0]`, which also caches the script there. */
  eval(lua: string, keys: readonly string[], args: readonly string[]): Promise<unknown>
  /** `DEL ...keys`. */
  del(keys: readonly string[]): Promise<unknown>
  /**
   * On a Cluster, the master serving `slot` as the client last saw it (`host:port`), if the client tells: it names
   * the failure domain of the keys in that slot (`RedisStore.failureDomainOf`). Without it, the slot number does.
   */
  nodeOf?(slot: number): string | undefined
  /**
   * Optional: runs `send`, which calls `evalSha` several times for keys of one node (on a Cluster, the master of
   * `slot`), so that those commands go out together: one write on the connection instead of one per command. It
   * calls `send` exactly once, synchronously, and changes nothing else (no retry, no other order). RedisStore uses
   * it for a flight of several calls to one node (several rule sets, or several hash slots of a Cluster node).
   * Without it each command goes out as the client sends it: node-redis and Valkey GLIDE already write the
   * commands of one turn of the event loop together; ioredis and iovalkey write each at once, and their runner
   * corks the node's connection for the length of `send`.
   */
  together?(slot: number, send: () => void): void
  /**
   * Optional: the most calls RedisStore keeps in flight on this client at once, all nodes together; what waits
   * past it stays in the store's own queue, unsent and without a clock (bounded by `maxWaiting`). For a client that
   * refuses requests past a number in flight, or that times a request from the moment it is made however long it
   * waits behind others: Valkey GLIDE (128, or its `inflightRequestsLimit` if lower). Without it, no bound.
   */
  readonly maxInFlight?: number
  /**
   * Optional: while the client has never been ready (it is making its first connection, or waits for its first
   * command to connect), a promise that settles once it is ready or has given up (ended); `undefined` when calls
   * may go now: once it has been ready, and while it is closed (its calls then fail at once, as the client answers
   * them). RedisStore holds its calls, unsent and without a clock, while the promise is pending, for at most its
   * `readyTimeout`: a client's connecting is not Redis failing to answer, and before it knows its Cluster's slot
   * table a client cannot say which node serves a key. Nothing is sent while it waits: a client that connects on
   * its first command (ioredis `lazyConnect`) is told to connect here. ioredis and iovalkey (`Redis`, `Cluster`)
   * have it. Without it, calls go at once, whatever the client's state.
   */
  whenReady?(): Promise<void> | undefined
}

/** True when `error` is the server saying it lacks the script: ioredis and node-redis `NOSCRIPT …`, GLIDE `NoScriptError`. */
export function isNoScript(error: unknown): boolean {
  return error instanceof Error && /\bNOSCRIPT\b|NoScriptError/.test(error.message)
}

/** True when `value` already is a runner (checked before client recognition: a runner may wrap any client). */
export function isScriptRunner(value: unknown): value is RedisScriptRunner {
  const runner = value as Partial<Record<keyof RedisScriptRunner, unknown>> | null | undefined
  return (
    typeof runner?.family === 'string' &&
    typeof runner.evalSha === 'function' &&
    typeof runner.eval === 'function' &&
    typeof runner.del === 'function'
  )
}
