/**
 * The packed core on real Redis: a standalone redis-server and a 3-master Cluster (test/support's harness), with
 * REDIS_OVERRIDES_RUN run against both in the redis-overrides project.
 */
import { execFile } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { RedisClusterProcesses, RedisServer } from '../../../test/support/redis-server.js'
import { REDIS_OVERRIDES_RUN } from '../programs/core.js'

const run = promisify(execFile)

/** The servers being started: a standalone server and a Cluster, each started or failed. */
export type StartedRedis = Promise<PromiseSettledResult<RedisServer | RedisClusterProcesses>[]>

/** A standalone redis-server and a 3-master Cluster, started together. */
export function startRedis(): StartedRedis {
  return Promise.allSettled([RedisServer.start(), RedisClusterProcesses.start(3)])
}

/**
 * Runs REDIS_OVERRIDES_RUN in the project against the servers `startRedis` started (while the project installed),
 * then stops them.
 */
export async function runOnRedis(dir: string, started: StartedRedis): Promise<void> {
  writeFileSync(join(dir, 'redis-overrides.mjs'), REDIS_OVERRIDES_RUN)
  const servers = await started
  try {
    const [standalone, cluster] = servers.map((server) => {
      if (server.status === 'rejected') throw server.reason
      return server.value
    }) as [RedisServer, RedisClusterProcesses]
    const env = {
      ...process.env,
      REDIS_PORT: String(standalone.port),
      CLUSTER_NODES: JSON.stringify(cluster.startupNodes),
    }
    const { stdout } = await run(process.execPath, ['redis-overrides.mjs'], {
      cwd: dir,
      env,
      timeout: 60_000,
    })
    if (stdout.trim() !== 'ok') throw new Error(`expected "ok", printed ${JSON.stringify(stdout)}`)
  } finally {
    await Promise.all(
      servers.map((server) => (server.status === 'fulfilled' ? server.value.stop() : undefined)),
    )
  }
}
