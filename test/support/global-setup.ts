import type { TestProject } from 'vitest/node'
import { RedisClusterProcesses, RedisServer, redisUnavailable } from './redis-server.js'

export interface RedisEnvironment {
  /** Why Redis tests cannot run, if they cannot: they then fail with this message (never skip). */
  error?: string
  standalonePort?: number
  clusterNodes?: { host: string; port: number }[]
}

declare module 'vitest' {
  export interface ProvidedContext {
    redis: RedisEnvironment
  }
}

/** Starts one standalone server and one 3-master cluster shared by the suites that only read and write keys. */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const error = redisUnavailable()
  if (error) {
    project.provide('redis', { error })
    return async () => {}
  }
  const [standalone, cluster] = await Promise.all([RedisServer.start(), RedisClusterProcesses.start(3)])
  project.provide('redis', { standalonePort: standalone.port, clusterNodes: cluster.startupNodes })
  return async () => {
    await Promise.all([standalone.stop(), cluster.stop()])
  }
}
