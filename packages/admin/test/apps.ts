/**
 * One app per mount, the same on each: `GET /api` decides with the `api` limiter for the key in `x-key` (200 or 429
 * with the outcome), and the admin endpoint under `/_ratewindow`. Each listens on a free port the OS gave it.
 */
import 'reflect-metadata'
import type { Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { serve } from '@hono/node-server'
import { Controller, Get, Headers, HttpException, type MiddlewareConsumer, Module } from '@nestjs/common'
import { NestFactory } from '@nestjs/core'
import { FastifyAdapter } from '@nestjs/platform-fastify'
import type { RateLimiter } from '@ratewindow/core'
import express from 'express'
import fastify from 'fastify'
import { Hono } from 'hono'
import Koa from 'koa'
import { expressAdmin } from '../src/express.js'
import { fastifyAdmin } from '../src/fastify.js'
import { honoAdmin } from '../src/hono.js'
import type { AdminHandler } from '../src/index.js'
import { koaAdmin } from '../src/koa.js'
import { nestAdmin } from '../src/nestjs.js'

export interface RunningApp {
  url: string
  close(): Promise<void>
}

export type Mount = (api: RateLimiter, admin: AdminHandler) => Promise<RunningApp>

/** The app's answer for `key`: 200 'allowed', or 429 'refused'. */
async function decide(api: RateLimiter, key: string): Promise<{ status: number; text: string }> {
  const result = await api.limit(key)
  return result.allowed ? { status: 200, text: 'allowed' } : { status: 429, text: 'refused' }
}

export async function listening(server: Server): Promise<RunningApp> {
  if (!server.listening) await new Promise((resolve) => server.once('listening', resolve))
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  }
}

const onExpress: Mount = async (api, admin) => {
  const app = express()
  // Before the app's JSON parser, as docs/operations.md says: bad JSON gets the endpoint's answer, not Express's.
  app.use(expressAdmin(admin))
  app.use(express.json())
  app.get('/api', async (request, response) => {
    const { status, text } = await decide(api, request.get('x-key') ?? '')
    response.status(status).send(text)
  })
  return listening(app.listen(0, '127.0.0.1'))
}

const onKoa: Mount = async (api, admin) => {
  const app = new Koa()
  app.use(koaAdmin(admin))
  app.use(async (ctx) => {
    if (ctx.path !== '/api') return
    const { status, text } = await decide(api, ctx.get('x-key'))
    ctx.status = status
    ctx.body = text
  })
  return listening(app.listen(0, '127.0.0.1'))
}

const onFastify: Mount = async (api, admin) => {
  const app = fastify()
  await app.register(fastifyAdmin(admin))
  app.get('/api', async (request, reply) => {
    const { status, text } = await decide(api, String(request.headers['x-key'] ?? ''))
    return reply.code(status).send(text)
  })
  await app.listen({ port: 0, host: '127.0.0.1' })
  return { ...(await listening(app.server)), close: () => app.close() }
}

const onHono: Mount = async (api, admin) => {
  const app = new Hono()
  app.use(honoAdmin(admin))
  app.get('/api', async (c) => {
    const { status, text } = await decide(api, c.req.header('x-key') ?? '')
    return c.text(text, status as 200 | 429)
  })
  const server = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }) as Server
  return listening(server)
}

/** A Nest app with the admin middleware, on platform-express (Nest's default) or platform-fastify. */
const onNest =
  (platform: 'express' | 'fastify'): Mount =>
  async (api, admin) => {
    @Controller()
    class ApiController {
      @Get('api')
      async get(@Headers('x-key') key: string | undefined) {
        const { status, text } = await decide(api, key ?? '')
        if (status !== 200) throw new HttpException(text, status)
        return text
      }
    }
    @Module({ controllers: [ApiController] })
    class AppModule {
      configure(consumer: MiddlewareConsumer) {
        consumer.apply(nestAdmin(admin)).forRoutes('*')
      }
    }
    const app =
      platform === 'express'
        ? await NestFactory.create(AppModule, { logger: false })
        : await NestFactory.create(AppModule, new FastifyAdapter(), { logger: false })
    await app.listen(0, '127.0.0.1')
    const running = await listening(app.getHttpServer() as Server)
    return { ...running, close: () => app.close() }
  }

export const MOUNTS: Record<string, Mount> = {
  Express: onExpress,
  Koa: onKoa,
  Fastify: onFastify,
  'Hono on Node': onHono,
  NestJS: onNest('express'),
  'NestJS on Fastify': onNest('fastify'),
}
