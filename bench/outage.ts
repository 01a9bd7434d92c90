/**
 * Figures for Redis going away, through the Express adapter over real HTTP on 127.0.0.1: a steady stream of
 * requests (10 in flight); redis-server is SIGKILLed, then restarted on the same port. Prints requests answered,
 * the worst latency during the outage, and the time from restart to the first decision by Redis again. Then a
 * 3+3 Cluster failover. Bounded: a few seconds of traffic, stops by itself.
 */
import { once } from 'node:events'
import type { AddressInfo } from 'node:net'
import { fixedWindow, RateLimiter, RedisStore } from '@ratewindow/core'
import { rateLimit } from '@ratewindow/express'
import express from 'express'
import { Cluster, Redis } from 'ioredis'
import { RedisClusterProcesses, RedisServer } from '../test/support/redis-server.js'
import { table } from './stats.js'

interface Sample {
  at: number
  ms: number
  status: number
  fromStore: boolean
}

async function standalone(): Promise<string[][]> {
  const server = await RedisServer.start()
  const client = new Redis({
    port: server.port,
    host: '127.0.0.1',
    maxRetriesPerRequest: 0,
    enableOfflineQueue: false,
    autoResendUnfulfilledCommands: false,
    connectTimeout: 500,
    retryStrategy: () => 50,
  })
  client.on('error', () => {})
  await once(client, 'ready')
  let failures = 0
  const app = express()
  app.use(
    rateLimit({
      limit: 1_000_000,
      store: new RedisStore({ client }),
      timeout: '100ms',
      onError: () => failures++,
    }),
  )
  app.get('/', (_request, response) => {
    response.send('ok')
  })
  const http = app.listen(0, '127.0.0.1')
  await once(http, 'listening')
  const url = `http://127.0.0.1:${(http.address() as AddressInfo).port}/`
  const samples: Sample[] = []
  const start = performance.now()
  let stop = false
  const worker = async () => {
    while (!stop) {
      const begin = performance.now()
      const response = await fetch(url)
      await response.text()
      samples.push({
        at: begin - start,
        ms: performance.now() - begin,
        status: response.status,
        fromStore: response.headers.has('ratelimit-limit'),
      })
    }
  }
  const workers = Array.from({ length: 10 }, worker)
  await new Promise((resolve) => setTimeout(resolve, 1_000))
  const killedAt = performance.now() - start
  await server.kill('SIGKILL')
  await new Promise((resolve) => setTimeout(resolve, 2_000))
  const restartedAt = performance.now() - start
  await server.restart()
  await new Promise((resolve) => setTimeout(resolve, 2_000))
  stop = true
  await Promise.all(workers)
  http.close()
  client.disconnect()
  await server.stop()
  const during = samples.filter((s) => s.at >= killedAt && s.at < restartedAt)
  const firstBack = samples.find((s) => s.at >= restartedAt && s.fromStore)
  return [
    ['requests sent / answered', `${samples.length} / ${samples.filter((s) => s.status > 0).length}`],
    [
      'answered during the 2 s outage (by the policy, fail open)',
      `${during.length}, all 200: ${during.every((s) => s.status === 200)}`,
    ],
    [
      'worst latency during the outage',
      `${Math.max(...during.map((s) => s.ms)).toFixed(1)} ms (timeout 100 ms)`,
    ],
    [
      'worst latency before the kill',
      `${Math.max(...samples.filter((s) => s.at < killedAt).map((s) => s.ms)).toFixed(1)} ms`,
    ],
    ['failures reported to onError', String(failures)],
    [
      'restart → first decision by Redis again',
      firstBack ? `${(firstBack.at - restartedAt).toFixed(0)} ms` : 'not within 2 s',
    ],
  ]
}

async function failover(): Promise<string[][]> {
  const cluster = await RedisClusterProcesses.start(3, 1)
  const client = new Cluster(cluster.startupNodes, {
    redisOptions: { maxRetriesPerRequest: 0, autoResendUnfulfilledCommands: false, connectTimeout: 500 },
    enableOfflineQueue: false,
    clusterRetryStrategy: () => 100,
    slotsRefreshTimeout: 500,
    slotsRefreshInterval: 1_000,
  })
  client.on('error', () => {})
  await once(client, 'ready')
  const store = new RedisStore({ client })
  const rule = fixedWindow({ limit: 1_000_000, window: '1h' })
  const limiter = new RateLimiter({ rules: rule, store, timeout: '200ms', onError: () => {} })
  await limiter.limit('client')
  const slot = Number(await client.cluster('KEYSLOT', store.keyFor(limiter.namespace, 'client', rule)))
  const owner = (await client.cluster('SLOTS')).find(([from, to]) => slot >= from && slot <= to)![2]![1]
  const killed = performance.now()
  await cluster.nodes.find((node) => node.port === owner)!.kill('SIGKILL')
  let answered = 0
  let worst = 0
  let back: number | undefined
  while (back === undefined && performance.now() - killed < 30_000) {
    const begin = performance.now()
    const result = await limiter.limit('client')
    worst = Math.max(worst, performance.now() - begin)
    answered++
    if (result.source === 'store') back = performance.now() - killed
    else await new Promise((resolve) => setTimeout(resolve, 20))
  }
  client.disconnect()
  await cluster.stop()
  return [
    [
      'Cluster: master of the key killed → first decision by the promoted replica',
      back ? `${back.toFixed(0)} ms` : 'not within 30 s',
    ],
    ['Cluster: requests answered meanwhile (policy) / worst latency', `${answered} / ${worst.toFixed(1)} ms`],
  ]
}

export async function runOutage(): Promise<string> {
  const rows = [...(await standalone()), ...(await failover())]
  return table(['what', 'measured'], rows)
}

if (import.meta.url === `file://${process.argv[1]}`) console.log(await runOutage())
