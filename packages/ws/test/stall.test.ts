/**
 * A stalled store (a redis-server stopped with SIGSTOP: it keeps its connections and answers nothing): the
 * failure policy answers each message once its decision times out, and nothing is buffered beyond `maxPending`:
 * the messages past it are refused at once, without a store call.
 */
import { once } from 'node:events'
import { fixedWindow, RedisStore } from '@ratewindow/core'
import { Redis } from 'ioredis'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { until } from '../../../test/support/connections.js'
import { RedisServer } from '../../../test/support/redis-server.js'
import { everyRefusalTold, type TestClient, type TestServer, WS } from './harness.js'

let redis: RedisServer
let client: Redis
let pid: number
beforeAll(async () => {
  redis = await RedisServer.start()
  client = new Redis({
    host: '127.0.0.1',
    port: redis.port,
    maxRetriesPerRequest: 0,
    autoResendUnfulfilledCommands: false,
    enableOfflineQueue: false,
  })
  client.on('error', () => {})
  await once(client, 'ready')
  pid = Number(/process_id:(\d+)/.exec(await redis.cli('info', 'server'))![1])
})
afterAll(async () => {
  client.disconnect()
  await redis.stop()
})

const servers: TestServer[] = []
const clients: TestClient[] = []
afterEach(async () => {
  for (const each of clients.splice(0)) each.terminate()
  await Promise.all(servers.splice(0).map((server) => server.close()))
})

describe.each(['allow', 'deny'] as const)("a stalled store, onStoreError '%s'", (onStoreError) => {
  it('maxPending messages wait for the policy; those past them are refused at once as busy', async () => {
    const server = await WS.start({
      messagesPerKey: {
        rules: fixedWindow({ limit: 100, window: '1h' }),
        store: new RedisStore({ client }),
        prefix: `stall-${onStoreError}`,
        timeout: '300ms',
        onStoreError,
        circuitBreaker: false,
        onError: () => {},
      },
      maxPending: 4,
      clock: everyRefusalTold(),
    })
    servers.push(server)
    const connected = await WS.connect(server.port)
    if (!connected.ok) throw new Error('refused')
    const socket = connected.client
    clients.push(socket)
    process.kill(pid, 'SIGSTOP')
    try {
      for (let i = 0; i < 10; i++) socket.send(`m${i}`)
      await until(() => socket.told.length >= 6, 'six refused as busy')
      expect(socket.told.map((error) => error.reason)).toEqual(Array(6).fill('busy'))
      await until(
        () => server.delivered.length + socket.told.length === 10,
        () => `the four waiting answered (delivered ${server.delivered.length}, told ${socket.told.length})`,
      )
    } finally {
      process.kill(pid, 'SIGCONT')
    }
    if (onStoreError === 'allow') expect(server.delivered).toEqual(['m0', 'm1', 'm2', 'm3'])
    else {
      expect(server.delivered).toEqual([])
      expect(socket.told.slice(6).map((error) => error.reason)).toEqual(Array(4).fill('unavailable'))
    }
  })
})
