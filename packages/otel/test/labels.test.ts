/**
 * Issue 19, item 7: metric labels are patterns, never values the client chooses, on every adapter; and the
 * labels this package fills from names and routes are capped.
 */
import type { Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import Router from '@koa/router'
import { metrics } from '@opentelemetry/api'
import {
  AggregationTemporality,
  type DataPoint,
  InMemoryMetricExporter,
  MeterProvider,
  PeriodicExportingMetricReader,
} from '@opentelemetry/sdk-metrics'
import type { DecisionEvent, RateLimitObserver } from '@ratewindow/core'
import { rateLimit as expressRateLimit } from '@ratewindow/express'
import { rateLimit as fastifyRateLimit } from '@ratewindow/fastify'
import { rateLimit as koaRateLimit } from '@ratewindow/koa'
import express5 from 'express'
import express4 from 'express4'
import fastify5 from 'fastify'
import fastify4 from 'fastify4'
import Koa3 from 'koa'
import Koa2 from 'koa2'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { OTHER_LABEL_VALUE, rateLimitMetrics } from '../src/index.js'

let exporter: InMemoryMetricExporter
let reader: PeriodicExportingMetricReader
let provider: MeterProvider

beforeEach(() => {
  exporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE)
  reader = new PeriodicExportingMetricReader({ exporter, exportIntervalMillis: 3_600_000 })
  provider = new MeterProvider({ readers: [reader] })
})
afterEach(async () => {
  await provider.shutdown()
  metrics.disable()
})

async function decisionPoints(): Promise<DataPoint<unknown>[]> {
  await reader.forceFlush()
  const metric = exporter
    .getMetrics()
    .at(-1)!
    .scopeMetrics.flatMap((scope) => scope.metrics)
    .find((each) => each.descriptor.name === 'ratewindow.decisions')
  return (metric?.dataPoints ?? []) as DataPoint<unknown>[]
}

/** The distinct `http.route` values counted. */
async function routeSeries(): Promise<string[]> {
  return [...new Set((await decisionPoints()).map((point) => String(point.attributes['http.route'])))]
}

/** A router mounted at `/t/:tenant` with a rate limited route `/items/:id`; the app listening on 127.0.0.1. */
type Start = (observer: RateLimitObserver) => Promise<{ url: string; close(): Promise<void> }>

const options = (observer: RateLimitObserver) => ({ limit: 100_000, name: 'tenants', observer })

async function listening(server: Server) {
  if (!server.listening) await new Promise((resolve) => server.once('listening', resolve))
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  }
}

function expressApp(create: typeof express5, mount: string): Start {
  return async (observer) => {
    const app = create()
    const router = create.Router()
    router.get('/items/:id', expressRateLimit(options(observer)), (_request, response) => {
      response.send('ok')
    })
    app.use(mount, router)
    return listening(app.listen(0, '127.0.0.1'))
  }
}

function koaApp(Koa: typeof Koa3): Start {
  return async (observer) => {
    const app = new Koa()
    const router = new Router({ prefix: '/t/:tenant' })
    router.get('/items/:id', koaRateLimit(options(observer)), (ctx) => {
      ctx.body = 'ok'
    })
    app.use(router.routes())
    return listening(app.listen(0, '127.0.0.1'))
  }
}

function fastifyApp(create: typeof fastify5): Start {
  return async (observer) => {
    const app = create()
    await app.register(
      async (tenant) => {
        await tenant.register(fastifyRateLimit, options(observer))
        tenant.get('/items/:id', async () => 'ok')
      },
      { prefix: '/t/:tenant' },
    )
    await app.listen({ port: 0, host: '127.0.0.1' })
    return listening(app.server)
  }
}

/** `count` requests, 20 at a time, each from another tenant. */
async function tenants(url: string, count: number): Promise<void> {
  for (let first = 0; first < count; first += 20) {
    const batch = Array.from({ length: 20 }, (_, i) =>
      fetch(`${url}/t/tenant-${first + i}/items/${first + i}`).then((response) => {
        expect(response.status).toBe(200)
        return response.text()
      }),
    )
    await Promise.all(batch)
  }
}

describe.each([
  ['Express 5', expressApp(express5, '/t/:tenant'), '/items/:id'],
  ['Express 4', expressApp(express4 as unknown as typeof express5, '/t/:tenant'), '/items/:id'],
  ['Koa 3 + @koa/router', koaApp(Koa3), '/t/:tenant/items/:id'],
  ['Koa 2 + @koa/router', koaApp(Koa2 as unknown as typeof Koa3), '/t/:tenant/items/:id'],
  ['Fastify 5', fastifyApp(fastify5), '/t/:tenant/items/:id'],
  ['Fastify 4', fastifyApp(fastify4 as unknown as typeof fastify5), '/t/:tenant/items/:id'],
])('%s: a router mounted at /t/:tenant', (_, start, pattern) => {
  it('1,000 requests from distinct tenants count under one route pattern', async () => {
    const app = await start(rateLimitMetrics({ meterProvider: provider }))
    try {
      await tenants(app.url, 1_000)
    } finally {
      await app.close()
    }
    // Before: Express labelled each tenant's path (`/t/tenant-17/items/:id`), 1,000 series.
    expect(await routeSeries()).toEqual([pattern])
  })
})

describe.each([
  ['Express 5', express5],
  ['Express 4', express4 as unknown as typeof express5],
])('%s: mounts', (_, create) => {
  it('a mount without parameters is part of the route; one with parameters is left out', async () => {
    const events: DecisionEvent[] = []
    const observer = { onDecision: (event: DecisionEvent) => void events.push(event) }
    const app = create()
    const api = create.Router()
    api.get('/items/:id', expressRateLimit(options(observer)), (_request, response) => {
      response.send('ok')
    })
    app.use('/api/v1', api)
    const tenant = create.Router()
    tenant.get('/items/:id', expressRateLimit(options(observer)), (_request, response) => {
      response.send('ok')
    })
    app.use('/t/:tenant', tenant)
    const running = await listening(app.listen(0, '127.0.0.1'))
    try {
      for (const path of ['/api/v1/items/1', '/API/V1/items/2', '/t/acme/items/3', '/t/globex/items/4']) {
        expect((await fetch(`${running.url}${path}`)).status).toBe(200)
      }
    } finally {
      await running.close()
    }
    expect(events.map((event) => event.route)).toEqual([
      '/api/v1/items/:id',
      '/api/v1/items/:id', // the mount as first seen: the spelling of a later request changes nothing
      '/items/:id',
      '/items/:id',
    ])
  })
})

describe('label cap', () => {
  const decision = (limiter: string, rule: string, route?: string): DecisionEvent =>
    ({ limiter, rule, route, outcome: 'allowed', source: 'store' }) as DecisionEvent

  it('keeps 100 routes and 100 rule names per limiter, and 100 limiter names, then counts `other`', async () => {
    const observer = rateLimitMetrics({ meterProvider: provider })
    for (let i = 0; i < 1_000; i++) observer.onDecision(decision('api', 'minute', `/route-${i}`))
    for (let i = 0; i < 1_000; i++) observer.onDecision(decision('api', `rule-${i}`, '/route-0'))
    for (let i = 0; i < 1_000; i++) observer.onDecision(decision(`limiter-${i}`, 'minute'))
    const points = await decisionPoints()
    const values = (name: string, limiter?: string) =>
      new Set(
        points
          .filter((point) => limiter === undefined || point.attributes['ratewindow.limiter'] === limiter)
          .map((point) => point.attributes[name]),
      )
    const routes = values('http.route', 'api')
    expect(routes.size).toBe(101)
    expect(routes.has(OTHER_LABEL_VALUE)).toBe(true)
    expect(routes.has('/route-99')).toBe(true)
    expect(routes.has('/route-100')).toBe(false)
    expect(values('ratewindow.rule', 'api').size).toBe(101)
    // `api` and 99 others, then `other`.
    expect(values('ratewindow.limiter').size).toBe(101)
    // Every decision is still counted.
    expect(points.reduce((sum, point) => sum + (point.value as number), 0)).toBe(3_000)
  })

  it('takes `maxLabelValues`, and refuses a bad one by name', async () => {
    const observer = rateLimitMetrics({ meterProvider: provider, maxLabelValues: 2 })
    for (const route of ['/a', '/b', '/c', '/d']) observer.onDecision(decision('api', 'minute', route))
    expect(await routeSeries()).toEqual(['/a', '/b', OTHER_LABEL_VALUE])
    for (const bad of [0, 1.5, '100'] as never[]) {
      expect(() => rateLimitMetrics({ maxLabelValues: bad })).toThrow(
        expect.objectContaining({ code: 'ERR_RATEWINDOW_INVALID_OPTION', option: 'maxLabelValues' }),
      )
    }
  })
})
