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
