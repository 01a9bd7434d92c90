/**
 * One application process for the synchronised-mode tests: a RateLimiter on a SyncedStore, driven by its parent
 * over IPC with bounded request counts. Started with child_process.fork by test/support/synced-processes.ts.
 */
import { RateLimiter, SyncedStore, slidingWindowCounter } from '@ratewindow/core'
import { Cluster, Redis } from 'ioredis'

export interface WorkerSetup {
  port?: number
  clusterNodes?: { host: string; port: number }[]
  prefix: string
  limit: number
  window: string
  interval: string
  maxPending: number
}

export type WorkerCommand =
  | { type: 'setup'; setup: WorkerSetup }
  | { type: 'run'; trace: 'steady' | 'bursty' | 'at-once'; requests: number; key: string }
  | { type: 'sync' }
  | { type: 'peek'; key: string }
  | { type: 'close' }

let client: Redis | Cluster
let store: SyncedStore
let limiter: RateLimiter

async function run(trace: string, requests: number, key: string): Promise<number> {
  let admitted = 0
  const one = async () => {
    const result = await limiter.limit(key)
    if (result.source !== 'store') throw new Error(`decided by ${result.source}`)
    if (result.allowed) admitted++
  }
  if (trace === 'at-once') await Promise.all(Array.from({ length: requests }, one))
  else if (trace === 'steady') {
    for (let i = 0; i < requests; i++) {
      await one()
      await new Promise((resolve) => setImmediate(resolve))
    }
  } else {
    // Bursts of 25 concurrent requests, each followed by one sync: what an interval tick does.
    for (let sent = 0; sent < requests; sent += 25) {
      await Promise.all(Array.from({ length: Math.min(25, requests - sent) }, one))
      await store.sync()
    }
  }
  return admitted
}

process.on('message', async (command: WorkerCommand) => {
  try {
    switch (command.type) {
      case 'setup': {
        const { setup } = command
        const options = { maxRetriesPerRequest: 1, autoResendUnfulfilledCommands: false }
        client = setup.clusterNodes
          ? new Cluster(setup.clusterNodes, { redisOptions: options })
          : new Redis({ host: '127.0.0.1', port: setup.port, ...options })
        store = new SyncedStore({ client, interval: setup.interval as '100ms', maxPending: setup.maxPending })
        limiter = new RateLimiter({
          rules: slidingWindowCounter({ limit: setup.limit, window: setup.window as '1h' }),
          store,
          prefix: setup.prefix,
          timeout: '5s',
          onError: (error) => process.send?.({ type: 'error', message: String(error) }),
        })
        process.send?.({ type: 'ready' })
        break
      }
      case 'run':
        process.send?.({ type: 'done', admitted: await run(command.trace, command.requests, command.key) })
        break
      case 'sync':
        await store.sync()
        process.send?.({ type: 'synced' })
        break
      case 'peek': {
        const result = await limiter.peek(command.key)
        process.send?.({ type: 'peeked', remaining: result.remaining, source: result.source })
        break
      }
      case 'close':
        await store.close()
        await client.quit()
        process.send?.({ type: 'closed' })
        process.exit(0)
    }
  } catch (error) {
    process.send?.({ type: 'failed', message: error instanceof Error ? error.stack : String(error) })
  }
})
