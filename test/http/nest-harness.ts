/**
 * The harness's routes on real Nest apps (`@nestjs/testing`), on both HTTP platforms: the module's limiter is the
 * global guard (`APP_GUARD`), `/limited` has its own `@RateLimit()`. Controllers use explicit tokens only (the
 * test files are compiled by esbuild, which emits no `design:paramtypes`).
 */
import { once } from 'node:events'
import type { Server, ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import {
  type ArgumentsHost,
  Catch,
  Controller,
  Get,
  HttpCode,
  HttpException,
  Inject,
  Module,
  Param,
  Post,
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
  type NestHttpRequest,
  RateLimit,
  RateWindowGuard,
  RateWindowModule,
  type RateWindowModuleOptions,
  RateWindowService,
  SkipRateLimit,
} from '@ratewindow/nestjs'
import type { AppSpec, Framework, RunningApp } from './harness.js'

export type NestPlatformName = 'express' | 'fastify'

/** The Nest major the `@nestjs/*` imports resolve to: 12, or 11 under vitest.nest11.config.ts. */
export const NEST_MAJOR = process.env.NEST_MAJOR ?? '12'

/** What the harness shares with its Nest apps: the parked routes and how to wait for a listening server. */
export interface HarnessRoutes {
  slow(): Promise<void>
  work(): Promise<void>
  hold(): Promise<void>
}

type ErrorWithCode = Error & { code?: string }

interface Sendable {
  status(code: number): Sendable
  header(name: string, value: string): Sendable
  send(body: string): unknown
}

/**
 * Express's `res` and Fastify's `reply` both have `status` and `send`; the header method differs. Node's own
 * response (what a Nest middleware's error carries on platform-fastify) has neither.
 */
function sendJson(platform: NestPlatformName, response: unknown, status: number, value: unknown): void {
  const target = response as Sendable & { setHeader(name: string, value: string): void }
  if (typeof target.status !== 'function') {
    const node = response as ServerResponse
    node.statusCode = status
    node.setHeader('content-type', 'application/json; charset=utf-8')
    node.end(JSON.stringify(value))
    return
  }
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
      await routes.slow()
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

/** A Nest app of `root` on `platform`, listening on 127.0.0.1, with the harness's errors-as-JSON filter. */
export async function startNest(
  platform: NestPlatformName,
  root: new (...args: never[]) => unknown,
  trustProxy: AppSpec['trustProxy'] = true,
): Promise<RunningApp> {
  const moduleRef = await Test.createTestingModule({ imports: [root] }).compile()
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
  if (!server.listening) await once(server, 'listening')
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  return { url, server, close: () => app.close() }
}

export function nestFramework(name: string, platform: NestPlatformName, routes: HarnessRoutes): Framework {
  return {
    name,
    start: (spec: AppSpec) => startNest(platform, nestModule(platform, spec, routes), spec.trustProxy),
  }
}

/**
 * composition.test.ts's app: GET `paths`, each answering `ok <path>`; `global` is the module's options with the
 * global guard, `routes` each path's own `@RateLimit()` (guarded by `@UseGuards` when there is no global guard).
 */
export function nestPathsModule(
  paths: readonly string[],
  global: RateWindowModuleOptions | undefined,
  routes: Partial<Record<string, RateWindowModuleOptions>>,
) {
  class PathsController {}
  const prototype = PathsController.prototype as unknown as Record<string, unknown>
  for (const path of paths) {
    const name = path === '/' ? 'root' : path.slice(1)
    prototype[name] = { [name]: () => `ok ${path}` }[name]
    const descriptor = Object.getOwnPropertyDescriptor(prototype, name)!
    Get(path)(prototype, name, descriptor)
    const route = routes[path]
    if (route) {
      RateLimit(route as never)(prototype, name, descriptor)
      if (!global) UseGuards(RateWindowGuard)(prototype, name, descriptor)
    }
  }
  Controller()(PathsController)
  @Module({
    imports: [RateWindowModule.forRoot(global ?? {})],
    controllers: [PathsController],
    providers: global ? [{ provide: APP_GUARD, useClass: RateWindowGuard }] : [],
  })
  class PathsModule {}
  return PathsModule
}

/**
 * policies.test.ts's app: GET / and GET /other limited by `options` (the global guard); POST /reset/:key and
 * POST /reset-me call `RateWindowService` and are not limited.
 */
export function nestPoliciesModule(options: RateWindowModuleOptions) {
  @Controller()
  class PoliciesController {
    constructor(@Inject(RateWindowService) private readonly limits: RateWindowService) {}

    @Get()
    root() {
      return 'ok'
    }

    @Get('other')
    other() {
      return 'ok'
    }

    @Post('reset/:key')
    @HttpCode(200)
    @SkipRateLimit()
    async resetKey(@Param('key') key: string) {
      await this.limits.resetKey(key)
      return 'reset'
    }

    @Post('reset-me')
    @HttpCode(200)
    @SkipRateLimit()
    async resetMe(@Req() request: NestHttpRequest) {
      await this.limits.reset(request)
      return 'reset'
    }
  }
  @Module({
    imports: [RateWindowModule.forRoot(options)],
    controllers: [PoliciesController],
    providers: [{ provide: APP_GUARD, useClass: RateWindowGuard }],
  })
  class PoliciesModule {}
  return PoliciesModule
}
