/**
 * The harness's routes on real Nest apps (`@nestjs/testing`), on both HTTP platforms: the module's limiter is the
 * global guard (`APP_GUARD`), `/limited` has its own `@RateLimit()`. Controllers use explicit tokens only (the
 * test files are compiled by esbuild, which emits no `design:paramtypes`).
 */
import type { Server } from 'node:http'
import {
  type ArgumentsHost,
  Catch,
  Controller,
  Get,
  HttpException,
  Module,
  Query,
  Req,
  Res,
  UseGuards,
} from '@nestjs/common'
import { APP_GUARD, BaseExceptionFilter } from '@nestjs/core'
import { ExpressAdapter, type NestExpressApplication } from '@nestjs/platform-express'
import { FastifyAdapter } from '@nestjs/platform-fastify'
import { Test } from '@nestjs/testing'
import type { RateLimitResult } from '@ratewindow/core'
import {
  RateLimit,
  RateWindowGuard,
  RateWindowModule,
  type RateWindowModuleOptions,
} from '@ratewindow/nestjs'
import type { AppSpec, Framework, RunningApp } from './harness.js'

export type NestPlatformName = 'express' | 'fastify'

/** What the harness shares with its Nest apps: the parked routes and how to wait for a listening server. */
export interface HarnessRoutes {
  untilReleased(): Promise<void>
  work(): Promise<void>
  hold(): Promise<void>
  listening(server: Server, close: () => Promise<void>): Promise<{ url: string; close(): Promise<void> }>
}

type ErrorWithCode = Error & { code?: string }

interface Sendable {
  status(code: number): Sendable
  header(name: string, value: string): Sendable
  send(body: string): unknown
}

/** Express's `res` and Fastify's `reply` both have `status` and `send`; the header method differs. */
function sendJson(platform: NestPlatformName, response: unknown, status: number, value: unknown): void {
  const target = response as Sendable & { setHeader(name: string, value: string): void }
  target.status(status)
  if (platform === 'fastify') target.header('content-type', 'application/json; charset=utf-8')
  else target.setHeader('content-type', 'application/json; charset=utf-8')
  target.send(JSON.stringify(value))
}

/** The other frameworks' error handlers: a thrown error answers 500 with its code (or message) as JSON. */
function errorsAsJson(platform: NestPlatformName) {
  @Catch()
  class ErrorsAsJson extends BaseExceptionFilter {
    override catch(exception: unknown, host: ArgumentsHost): void {
      if (exception instanceof HttpException) {
        super.catch(exception, host)
        return
      }
      const error = exception as ErrorWithCode
      sendJson(platform, host.switchToHttp().getResponse(), 500, { error: error.code ?? error.message })
    }
  }
  return ErrorsAsJson
}

/** The Nest app of a spec: `global` is the module's options with the global guard, `route` the `/limited` one's. */
export function nestModule(platform: NestPlatformName, spec: AppSpec, routes: HarnessRoutes) {
  const { global, route } = spec

  @Controller()
  class AppController {
    @Get()
    root() {
      return 'ok'
    }

    @Get('fail')
    fail(@Res({ passthrough: true }) response: Sendable) {
      response.status(500)
      return 'failed'
    }

    @Get('slow')
    async slow() {
      await routes.untilReleased()
      return 'late'
    }

    @Get('work')
    async work() {
      await routes.work()
      return 'done' // also when the client left: the handler ends its response
    }

    @Get('limited')
    limited() {
      return 'limited route'
    }

    @Get('state')
    state(@Req() request: { rateLimit?: RateLimitResult }, @Res() response: unknown) {
      sendJson(platform, response, 200, request.rateLimit ?? null)
    }

    @Get('hold')
    async hold() {
      await routes.hold()
      return 'held'
    }

    @Get('settle')
    async settle(
      @Req() request: { rateLimit?: RateLimitResult },
      @Query('n') n: string,
      @Res() response: unknown,
    ) {
      sendJson(platform, response, 200, (await request.rateLimit?.settle?.(Number(n))) ?? null)
    }
  }
  if (route) {
    const descriptor = Object.getOwnPropertyDescriptor(AppController.prototype, 'limited')!
    RateLimit(route as never)(AppController.prototype, 'limited', descriptor)
    if (!global) UseGuards(RateWindowGuard)(AppController.prototype, 'limited', descriptor)
  }

  @Module({
    imports: [RateWindowModule.forRoot((global ?? {}) as RateWindowModuleOptions)],
    controllers: [AppController],
    providers: global ? [{ provide: APP_GUARD, useClass: RateWindowGuard }] : [],
  })
  class AppModule {}
  return AppModule
}

export function nestFramework(name: string, platform: NestPlatformName, routes: HarnessRoutes): Framework {
  return {
    name,
    async start(spec: AppSpec): Promise<RunningApp> {
      const { trustProxy = true } = spec
      const moduleRef = await Test.createTestingModule({
        imports: [nestModule(platform, spec, routes)],
      }).compile()
      const adapter =
        platform === 'fastify'
          ? new FastifyAdapter({
              trustProxy: trustProxy === 'every-hop' ? true : trustProxy ? '127.0.0.1' : false,
            })
          : new ExpressAdapter()
      const app = moduleRef.createNestApplication<NestExpressApplication>(adapter, { logger: false })
      if (platform === 'express') {
        app.set('trust proxy', trustProxy === 'every-hop' ? true : trustProxy ? 'loopback' : false)
      }
      const Filter = errorsAsJson(platform)
      app.useGlobalFilters(new Filter(app.getHttpAdapter()))
      try {
        await app.listen(0, '127.0.0.1')
      } catch (error) {
        await app.close().catch(() => undefined)
        throw error
      }
      const server = app.getHttpServer() as Server
      const { url } = await routes.listening(server, () => app.close())
      return { url, server, close: () => app.close() }
    },
  }
}
