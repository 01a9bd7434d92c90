/**
 * One app per framework and major version with `slowDown()` in front of every route, so that one suite runs
 * unchanged against every adapter. GET / answers the request's slow-down info as JSON; GET /fail answers 500
 * with it. `handled` counts the handlers that ran.
 */

import { Controller, Get, type MiddlewareConsumer, Module, type NestModule, Req, Res } from '@nestjs/common'
import type { SlowDownInfo, SlowDownOptions } from '@ratewindow/core'
import { slowDown as expressSlowDown } from '@ratewindow/express'
import { slowDown as fastifySlowDown } from '@ratewindow/fastify'
import { slowDown as honoSlowDown, type SlowDownEnv } from '@ratewindow/hono'
import { slowDown as koaSlowDown } from '@ratewindow/koa'
import { type NestHttpRequest, slowDown as nestSlowDown } from '@ratewindow/nestjs'
import express5 from 'express'
import express4 from 'express4'
import fastify5 from 'fastify'
import fastify4 from 'fastify4'
import { Hono } from 'hono'
import Koa3 from 'koa'
import Koa2 from 'koa2'
import { honoErrorsAsJson } from '../support/hono-app.js'
import type { ManualTimers } from '../support/timers.js'
import {
  expressErrorsAsJson,
  fastifyErrorsAsJson,
  honoAddress,
  koaErrorsAsJson,
  listening,
  type RunningApp,
  serveHono,
} from './harness.js'
import { NEST_MAJOR, type NestPlatformName, startNest } from './nest-harness.js'

/** The options every adapter shares; callbacks get the adapter's own arguments. */
export type CommonSlowDownOptions = SlowDownOptions<never[]>

export interface SlowApp extends RunningApp {
  /** Handlers that ran. */
  readonly handled: number
}

export interface SlowFramework {
  name: string
  start(options: CommonSlowDownOptions): Promise<SlowApp>
}

/** What a handler answers: the info the adapter put on the request. */
export type Answered = SlowDownInfo | null

function expressFramework(name: string, create: typeof express5): SlowFramework {
  return {
    name,
    async start(options) {
      let handled = 0
      const app = create()
      app.set('trust proxy', 'loopback')
      app.use(expressSlowDown(options as never))
      app.get('/', (request, response) => {
        handled++
        response.json(request.slowDown ?? null)
      })
      app.get('/fail', (request, response) => {
        handled++
        response.status(500).json(request.slowDown ?? null)
      })
      app.use(expressErrorsAsJson)
      const server = app.listen(0, '127.0.0.1')
      return withHandled({ ...(await listening(server)), server }, () => handled)
    },
  }
}

function koaFramework(name: string, Koa: typeof Koa3): SlowFramework {
  return {
    name,
    async start(options) {
      let handled = 0
      const app = new Koa()
      app.proxy = true
      app.maxIpsCount = 1
      app.use(koaErrorsAsJson)
      app.use(koaSlowDown(options as never))
      app.use(async (ctx) => {
        handled++
        if (ctx.path === '/fail') ctx.status = 500
        ctx.type = 'json'
        ctx.body = JSON.stringify(ctx.state.slowDown ?? null)
      })
      const server = app.listen(0, '127.0.0.1')
      return withHandled({ ...(await listening(server)), server }, () => handled)
    },
  }
}

function fastifyFramework(name: string, create: typeof fastify5): SlowFramework {
  return {
    name,
    async start(options) {
      let handled = 0
      const app = create({ trustProxy: '127.0.0.1' })
      app.setErrorHandler(fastifyErrorsAsJson)
      app.addHook('onRequest', fastifySlowDown(options as never))
      app.get('/', async (request) => {
        handled++
        return request.slowDown ?? null
      })
      app.get('/fail', async (request, reply) => {
        handled++
        return reply.code(500).send(request.slowDown ?? null)
      })
      await app.listen({ port: 0, host: '127.0.0.1' })
      const running = await listening(app.server, () => app.close())
      return withHandled({ ...running, server: app.server }, () => handled)
    },
  }
}

function honoFramework(name: string): SlowFramework {
  return {
    name,
    async start(options) {
      let handled = 0
      const app = new Hono<SlowDownEnv>()
      app.onError(honoErrorsAsJson)
      app.use(honoSlowDown({ ...(honoAddress() as object), ...(options as object) } as never))
      app.get('/', (c) => {
        handled++
        return c.json(c.get('slowDown') ?? null)
      })
      app.get('/fail', (c) => {
        handled++
        return c.json(c.get('slowDown') ?? null, 500)
      })
      const running = await serveHono(app as never)
      return withHandled(running, () => handled)
    },
  }
}

/**
 * A Nest app with `slowDown()` as the module's middleware for every route. On platform-fastify the middleware sees
 * Node's request, so a handler reads the info on `request.raw`.
 */
function nestFramework(name: string, platform: NestPlatformName): SlowFramework {
  return {
    name,
    async start(options) {
      let handled = 0
      const infoOf = (request: NestHttpRequest) =>
        (platform === 'fastify' ? request.raw.slowDown : request.slowDown) ?? null
      const answer = (response: unknown, status: number, body: unknown) => {
        const target = response as { status(code: number): { send(body: string): unknown } }
        const typed = response as {
          header?(name: string, value: string): unknown
          setHeader?(name: string, value: string): unknown
        }
        if (platform === 'fastify') typed.header!('content-type', 'application/json')
        else typed.setHeader!('content-type', 'application/json')
        target.status(status).send(JSON.stringify(body))
      }

      @Controller()
      class SlowController {
        @Get()
        root(@Req() request: NestHttpRequest, @Res() response: unknown) {
          handled++
          answer(response, 200, infoOf(request))
        }

        @Get('fail')
        fail(@Req() request: NestHttpRequest, @Res() response: unknown) {
          handled++
          answer(response, 500, infoOf(request))
        }
      }

      @Module({ controllers: [SlowController] })
      class SlowModule implements NestModule {
        configure(consumer: MiddlewareConsumer) {
          consumer.apply(nestSlowDown(options as never)).forRoutes('*')
        }
      }
      return withHandled(await startNest(platform, SlowModule), () => handled)
    },
  }
}

function withHandled(running: RunningApp, handled: () => number): SlowApp {
  return {
    ...running,
    get handled() {
      return handled()
    },
  }
}

export const SLOW_FRAMEWORKS: SlowFramework[] = [
  expressFramework('Express 5', express5),
  expressFramework('Express 4', express4 as unknown as typeof express5),
  koaFramework('Koa 3', Koa3),
  koaFramework('Koa 2', Koa2 as unknown as typeof Koa3),
  fastifyFramework('Fastify 5', fastify5),
  fastifyFramework('Fastify 4', fastify4 as unknown as typeof fastify5),
  honoFramework('Hono 4 on Node'),
  nestFramework(`Nest ${NEST_MAJOR} on Express`, 'express'),
  nestFramework(`Nest ${NEST_MAJOR} on Fastify`, 'fastify'),
]

/** One answered request. */
export interface Call {
  status: number
  info: Answered
  /** The delay the request was held for on the driven timers (0: none). */
  waited: number
}

/**
 * One request, released by advancing the timers by exactly the delay it was armed with (the app's middleware
 * runs on `timers`, and nothing else is delayed meanwhile).
 */
export async function call(
  app: Pick<SlowApp, 'url'>,
  timers: ManualTimers,
  path = '/',
  headers: Record<string, string> = {},
): Promise<Call> {
  const response = fetch(`${app.url}${path}`, { headers })
  const first = await Promise.race([response.then(() => 'answered' as const), timers.armed()])
  let waited = 0
  if (first !== 'answered') {
    waited = first
    timers.advance(first)
  }
  const answered = await response
  return { status: answered.status, info: (await answered.json()) as Answered, waited }
}
