/** The runtime check of each HTTP adapter: the same three requests to each framework's server. */

import { esmAndCjs, loader, type ModuleSystem } from './load.js'

/** The HTTP servers the runtime checks start, one per adapter (Nest on each of its platforms). */
export type Framework = 'express' | 'koa' | 'fastify' | 'hono' | 'nestjs-express' | 'nestjs-fastify'

type Load = (name: string) => string

/**
 * Each framework's app limited to 2 requests a minute, listening on a free port of 127.0.0.1: the statements that
 * leave `port` and `close` defined.
 */
const SETUPS: Record<Framework, (load: Load) => string> = {
  express: (load) => `const express = ${load('express')}.default ?? ${load('express')}
  const { rateLimit } = ${load('@ratewindow/express')}
  const app = express()
  app.use(rateLimit({ limit: 2, window: '1m' }))
  app.get('/', (_req, res) => { res.send('hi') })
  const server = await new Promise((resolve) => { const s = app.listen(0, '127.0.0.1', () => resolve(s)) })
  const port = server.address().port
  const close = () => server.close()`,
  koa: (load) => `const Koa = ${load('koa')}.default ?? ${load('koa')}
  const { rateLimit } = ${load('@ratewindow/koa')}
  const app = new Koa()
  app.use(rateLimit({ limit: 2, window: '1m' }))
  app.use((ctx) => { ctx.body = 'hi' })
  const server = await new Promise((resolve) => { const s = app.listen(0, '127.0.0.1', () => resolve(s)) })
  const port = server.address().port
  const close = () => server.close()`,
  hono: (load) => `const { Hono } = ${load('hono')}
  const { serve } = ${load('@hono/node-server')}
  const { getConnInfo } = ${load('@hono/node-server/conninfo')}
  const { rateLimit } = ${load('@ratewindow/hono')}
  const app = new Hono()
  app.use(rateLimit({ limit: 2, window: '1m', getConnInfo }))
  app.get('/', (c) => c.text('hi'))
  const server = await new Promise((resolve) => { const s = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }, () => resolve(s)) })
  const port = server.address().port
  const close = () => server.close()`,
  fastify: (load) => `const Fastify = ${load('fastify')}.default ?? ${load('fastify')}
  const { rateLimit } = ${load('@ratewindow/fastify')}
  const app = Fastify()
  await app.register(rateLimit, { limit: 2, window: '1m' })
  app.get('/', async () => 'hi')
  await app.listen({ port: 0, host: '127.0.0.1' })
  const port = app.server.address().port
  const close = () => app.close()`,
  'nestjs-express': (load) => nestSetup(load, 'express'),
  'nestjs-fastify': (load) => nestSetup(load, 'fastify'),
}

/** A Nest app in plain JavaScript: decorators applied as functions. */
function nestSetup(load: Load, platform: 'express' | 'fastify'): string {
  return `${load('reflect-metadata')}
  const { Controller, Get, Module } = ${load('@nestjs/common')}
  const { APP_GUARD, NestFactory } = ${load('@nestjs/core')}
  const { RateWindowGuard, RateWindowModule } = ${load('@ratewindow/nestjs')}
  class AppController {
    hello() { return 'hi' }
  }
  Get()(AppController.prototype, 'hello', Object.getOwnPropertyDescriptor(AppController.prototype, 'hello'))
  Controller()(AppController)
  class AppModule {}
  Module({
    imports: [RateWindowModule.forRoot({ limit: 2, window: '1m' })],
    controllers: [AppController],
    providers: [{ provide: APP_GUARD, useClass: RateWindowGuard }],
  })(AppModule)
  ${platform === 'fastify' ? `const { FastifyAdapter } = ${load('@nestjs/platform-fastify')}\n  const app = await NestFactory.create(AppModule, new FastifyAdapter(), { logger: false })` : `const app = await NestFactory.create(AppModule, { logger: false })`}
  await app.listen(0, '127.0.0.1')
  const port = app.getHttpServer().address().port
  const close = () => app.close()`
}

/** Runtime check of an adapter: three requests to its server; it prints `ok` when the third is denied (429). */
function serverRun(moduleSystem: ModuleSystem, framework: Framework): string {
  return `async function main() {
  ${SETUPS[framework](loader(moduleSystem))}
  const statuses = []
  for (let i = 0; i < 3; i++) statuses.push((await fetch('http://127.0.0.1:' + port + '/')).status)
  await close()
  if (statuses.join() !== '200,200,429') throw new Error('statuses ' + statuses.join())
  console.log('ok')
}
main().catch((error) => { console.error(error); process.exit(1) })
`
}

/** A project's runs of `framework`'s server: `run-<framework>.mjs` and `.cjs`. */
export const serverRuns = (framework: Framework): Record<string, string> =>
  esmAndCjs(`run-${framework}`, (moduleSystem) => serverRun(moduleSystem, framework))
