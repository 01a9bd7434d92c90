import { invalid } from '../../../support/errors.js'
import { type GlideLike, glideRunner, isGlideClient } from './glide.js'
import { type IoredisLike, ioredisRunner, isIoredisClient } from './ioredis.js'
import { isNodeRedisClient, type NodeRedisLike, nodeRedisRunner } from './node-redis.js'
import { isScriptRunner, type RedisScriptRunner } from './runner.js'

export { type GlideLike, glideRunner } from './glide.js'
export { type IoredisLike, ioredisRunner } from './ioredis.js'
export { type NodeRedisLike, nodeRedisRunner } from './node-redis.js'
export { isNoScript, type RedisScriptRunner } from './runner.js'

/** A client RedisStore recognises, or a runner of your own. */
export type RedisClient = IoredisLike | NodeRedisLike | GlideLike | RedisScriptRunner

/** The runner for `client`, recognised by shape (no client library is loaded), or undefined. */
export function scriptRunnerFor(client: unknown): RedisScriptRunner | undefined {
  if (isScriptRunner(client)) return client
  if (isIoredisClient(client)) return ioredisRunner(client)
  if (isGlideClient(client)) return glideRunner(client)
  if (isNodeRedisClient(client)) return nodeRedisRunner(client)
  return undefined
}

/** The runner for a store's `client` option, or the error naming what the option takes (RedisStore, SyncedStore). */
export function clientOption(client: unknown): RedisScriptRunner {
  const runner = scriptRunnerFor(client)
  if (runner !== undefined) return runner
  throw invalid(
    'ERR_RATEWINDOW_INVALID_OPTION',
    'client',
    client,
    'an ioredis or iovalkey Redis or Cluster, a node-redis client or cluster, a Valkey GLIDE client, or a RedisScriptRunner',
  )
}
