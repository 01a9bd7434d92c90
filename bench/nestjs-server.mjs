/**
 * One Nest benchmark server on the Fastify platform, in its own process (see http-server.ts for the protocol:
 * prints `{"port":N}`, answers CPU time over IPC). argv: <variant>: `bare`, `ratewindow` (RateWindowModule, its
 * MemoryStore, the global guard) or `throttler` (@nestjs/throttler with its default storage, its guard). Both
 * limit by the client address (Fastify's `trustProxy`: the X-Forwarded-For the load generator sends), 1 minute,
 * a limit no client reaches, and send their default headers (ours: draft-6, four; the throttler's: three).
 *
 * Plain JavaScript run by node itself (decorators applied as functions): Nest 12 is ESM only, and @nestjs/throttler
 * (CommonJS) requires it; under tsx's require hook that require would load a second copy of @nestjs/core.
 */
import 'reflect-metadata'
import { Controller, Get, Module } from '@nestjs/common'
import { APP_GUARD, NestFactory } from '@nestjs/core'
import { FastifyAdapter } from '@nestjs/platform-fastify'
import { ThrottlerGuard, ThrottlerModule } from '@nestjs/throttler'
import { RateWindowGuard, RateWindowModule } from '@ratewindow/nestjs'

const [variant = 'bare'] = process.argv.slice(2)
const limit = 100_000_000

class AppController {
  root() {
    return 'ok'
  }
}
Get()(AppController.prototype, 'root', Object.getOwnPropertyDescriptor(AppController.prototype, 'root'))
Controller()(AppController)

const setups = {
  bare: { imports: [] },
  ratewindow: { imports: [RateWindowModule.forRoot({ limit, window: '1m' })], guard: RateWindowGuard },
  throttler: { imports: [ThrottlerModule.forRoot([{ ttl: 60_000, limit }])], guard: ThrottlerGuard },
}
const setup = setups[variant]
if (setup === undefined)
  throw new Error(`nestjs-server: no variant ${variant} (${Object.keys(setups).join(', ')})`)

class AppModule {}
Module({
  imports: setup.imports,
  controllers: [AppController],
  providers: setup.guard ? [{ provide: APP_GUARD, useClass: setup.guard }] : [],
})(AppModule)

const app = await NestFactory.create(AppModule, new FastifyAdapter({ trustProxy: true }), {
  logger: ['error'],
  abortOnError: false,
})
await app.listen(0, '127.0.0.1')
console.log(JSON.stringify({ port: app.getHttpServer().address().port }))
process.on('message', () => {
  const { user, system } = process.cpuUsage()
  process.send?.({ cpu: user + system })
})
for (const signal of ['SIGINT', 'SIGTERM']) process.once(signal, () => process.exit(0))
