/**
 * What only the Nest module has (the shared behaviour runs in behaviour.test.ts and its neighbours through
 * nest-harness.ts): decorators, named limiters, budgets, the exception through the app's filters, the async
 * module, the reset service, the middleware form, other contexts and shutdown. Both HTTP platforms.
 */
import type { Server } from 'node:http'
import {
  type ArgumentsHost,
  type CanActivate,
  Catch,
  Controller,
  type ExceptionFilter,
  type ExecutionContext,
  Get,
  Inject,
  Injectable,
  type MiddlewareConsumer,
  Module,
  type NestModule,
  Post,
  Req,
  UseGuards,
} from '@nestjs/common'
import { APP_GUARD } from '@nestjs/core'
import { ExpressAdapter } from '@nestjs/platform-express'
import { FastifyAdapter } from '@nestjs/platform-fastify'
import { Test } from '@nestjs/testing'
import { MemoryStore, type Store } from '@ratewindow/core'
import {
  RateLimit,
  RateLimitException,
  RateWindowGuard,
  RateWindowMiddleware,
  RateWindowModule,
  type RateWindowModuleOptions,
  RateWindowService,
  SkipRateLimit,
} from '@ratewindow/nestjs'
import request from 'supertest'
import { afterEach, describe, expect, it } from 'vitest'
import { NEST_MAJOR } from './nest-harness.js'

type Platform = 'express' | 'fastify'

interface App {
  url: string
  get<T>(token: abstract new (...args: never[]) => T): T
  close(): Promise<void>
}

let running: App | undefined
afterEach(async () => {
  await running?.close()
  running = undefined
})

async function start(platform: Platform, root: new (...args: never[]) => unknown): Promise<App> {
  const moduleRef = await Test.createTestingModule({ imports: [root] }).compile()
  const app = moduleRef.createNestApplication(
    platform === 'fastify' ? new FastifyAdapter() : new ExpressAdapter(),
    { logger: false },
  )
  await app.listen(0, '127.0.0.1')
  const server = app.getHttpServer() as Server
  const address = server.address() as { port: number }
  running = {
    url: `http://127.0.0.1:${address.port}`,
    get: (token) => app.get(token),
    close: () => app.close(),
  }
  return running
}

@Controller('a')
class AController {
  @Get('one')
  one() {
    return 'a1'
  }

  @Get('two')
  two() {
    return 'a2'
  }

  @Get('own')
  @RateLimit({ limit: 1 })
  own() {
    return 'own'
  }

  @Get('free')
  @SkipRateLimit()
  free() {
    return 'free'
  }
}

@Controller('b')
@RateLimit({ limit: 2 })
class BController {
  @Get('one')
  one() {
    return 'b1'
  }

  @Get('two')
  two() {
    return 'b2'
  }
}

const globalGuard = { provide: APP_GUARD, useClass: RateWindowGuard }

function appModule(
  options: RateWindowModuleOptions,
  controllers: (new (...args: never[]) => unknown)[] = [AController, BController],
) {
  @Module({ imports: [RateWindowModule.forRoot(options)], controllers, providers: [globalGuard] })
  class AppModule {}
  return AppModule
}

describe.each(['express', 'fastify'] as const)(`Nest ${NEST_MAJOR} on %s`, (platform) => {
  it('a global guard counts one budget per client across routes; @RateLimit() on a handler or controller has its own', async () => {
    const { url } = await start(platform, appModule({ limit: 3, window: '1m' }))
    await request(url).get('/a/one').expect(200, 'a1')
    await request(url).get('/a/two').expect(200, 'a2')
    const third = await request(url).get('/a/one').expect(200)
    expect(third.headers['ratelimit-remaining']).toBe('0')
    await request(url).get('/a/two').expect(429)
    // The handler's own limiter (limit 1) and the controller's (limit 2, shared by its handlers) still admit.
    expect((await request(url).get('/a/own').expect(200, 'own')).headers['ratelimit-limit']).toBe('1')
    await request(url).get('/a/own').expect(429)
    await request(url).get('/b/one').expect(200, 'b1')
    await request(url).get('/b/two').expect(200, 'b2')
    await request(url).get('/b/one').expect(429)
    // Skipped: no headers, never refused.
    const free = await request(url).get('/a/free').expect(200, 'free')
    expect(free.headers['ratelimit-limit']).toBeUndefined()
  })

  it('perRoute counts each handler on its own, as @nestjs/throttler does', async () => {
    const { url } = await start(platform, appModule({ limit: 1, perRoute: true }))
    await request(url).get('/a/one').expect(200)
    await request(url).get('/a/two').expect(200)
    await request(url).get('/a/one').expect(429)
    await request(url).get('/a/two').expect(429)
    // A controller's @RateLimit() is per handler too under perRoute.
    await request(url).get('/b/one').expect(200)
    await request(url).get('/b/one').expect(200)
    await request(url).get('/b/one').expect(429)
    await request(url).get('/b/two').expect(200)
  })

  it('several named limiters at once; @RateLimit({ name }) overrides one, @SkipRateLimit(name) skips one', async () => {
    @Controller()
    class Named {
      @Get('both')
      both() {
        return 'both'
      }

      @Get('roomy')
      @RateLimit({ name: 'burst', limit: 5 })
      roomy() {
        return 'roomy'
      }

      @Get('no-burst')
      @SkipRateLimit('burst')
      noBurst() {
        return 'no-burst'
      }
    }
    const { url } = await start(
      platform,
      appModule(
        {
          window: '1m',
          limiters: [
            { name: 'burst', limit: 2 },
            { name: 'sustained', limit: 4, headers: 'draft-8' },
          ],
        },
        [Named],
      ),
    )
    await request(url).get('/both').expect(200)
    await request(url).get('/both').expect(200)
    const refused = await request(url).get('/both').expect(429)
    expect(refused.body).toMatchObject({ error: 'Too Many Requests' })
    // The burst limiter (draft-6 headers, limit 2) refused it.
    expect(refused.headers['ratelimit-limit']).toBe('2')
    // The sustained limiter counted the two admitted requests (the refused one stopped at burst).
    const roomy = await request(url).get('/roomy').expect(200)
    expect(roomy.headers.ratelimit).toMatch(/r=1/)
    await request(url).get('/no-burst').expect(200)
    await request(url).get('/no-burst').expect(429)
  })

  it('a @RateLimit() without a name is refused at start when the module has several limiters', async () => {
    @Controller()
    class Unnamed {
      @Get()
      @RateLimit({ limit: 5 })
      root() {
        return 'ok'
      }
    }
    const module = appModule(
      {
        limiters: [
          { name: 'burst', limit: 2 },
          { name: 'sustained', limit: 4 },
        ],
      },
      [Unnamed],
    )
    await expect(start(platform, module)).rejects.toThrow(/needs a `name`/)
  })

  it('a @RateLimit() without a name is accepted with one entry in `limiters`, and overrides it', async () => {
    @Controller()
    class Unnamed {
      @Get()
      @RateLimit({ limit: 1 })
      root() {
        return 'ok'
      }
    }
    const { url } = await start(platform, appModule({ limiters: [{ name: 'api', limit: 5 }] }, [Unnamed]))
    expect((await request(url).get('/').expect(200)).headers['ratelimit-limit']).toBe('1')
    await request(url).get('/').expect(429)
  })

  // Issue 32: `@RateLimit({ name: 'login' })` on a one-limiter module made no limiter named `login` (the name only
  // named it in observer events), and `reset(request, { name: 'login' })` then answered 500 at request time.
  it("one limiter: a decorator's name names its override, which a reset by that name reaches (regression)", async () => {
    @Controller('auth')
    class Login {
      constructor(@Inject(RateWindowService) private readonly limits: RateWindowService) {}

      @Post('login')
      @RateLimit({ name: 'login', limit: 2 })
      async login(@Req() req: { headers: Record<string, string> }) {
        if (req.headers['x-password'] === 'right') await this.limits.reset(req, { name: 'login' })
        return 'done'
      }
    }
    const { url } = await start(platform, appModule({ limit: 3 }, [Login, AController]))
    await request(url).get('/a/one').expect(200)
    await request(url).post('/auth/login').expect(201)
    await request(url).post('/auth/login').set('X-Password', 'right').expect(201) // forgets the login attempts
    await request(url).post('/auth/login').expect(201)
    await request(url).post('/auth/login').expect(201)
    await request(url).post('/auth/login').expect(429) // its own limit: 2
    // The module's budget was not reset: 1 used before, 2 after.
    await request(url).get('/a/one').expect(200)
    await request(url).get('/a/one').expect(200)
    await request(url).get('/a/one').expect(429)
  })

  // Issue 32: a typo in `@SkipRateLimit()` was ignored.
  it('a @SkipRateLimit() naming no limiter is refused at start, listing the names (regression)', async () => {
    @Controller()
    class Typo {
      @Get()
      @SkipRateLimit('defualt')
      root() {
        return 'ok'
      }
    }
    await expect(start(platform, appModule({ limit: 100 }, [Typo]))).rejects.toMatchObject({
      code: 'ERR_RATEWINDOW_UNKNOWN_LIMITER',
      message: expect.stringMatching(/`@SkipRateLimit\('defualt'\)` of Typo\.root .*'default'/),
    })
    @Controller()
    @SkipRateLimit('brust')
    class TypoOnClass {
      @Get()
      root() {
        return 'ok'
      }
    }
    const named = {
      limiters: [
        { name: 'burst', limit: 2 },
        { name: 'sustained', limit: 4 },
      ],
    }
    await expect(start(platform, appModule(named, [TypoOnClass]))).rejects.toMatchObject({
      code: 'ERR_RATEWINDOW_UNKNOWN_LIMITER',
      message: expect.stringMatching(/'brust'.* of TypoOnClass .*'burst', 'sustained'/),
    })
    // A name one decorator adds (with `limiters`) may be skipped elsewhere.
    @Controller('login')
    class Adds {
      @Post()
      @RateLimit({ name: 'login', limit: 2 })
      login() {
        return 'ok'
      }
    }
    @Controller('other')
    @SkipRateLimit('login', 'burst')
    class SkipsAdded {
      @Get()
      root() {
        return 'ok'
      }
    }
    const { url } = await start(platform, appModule(named, [Adds, SkipsAdded]))
    await request(url).get('/other').expect(200)
  })

  it("the login example: a reset scoped to the login limiter leaves the app's budget as it was", async () => {
    @Controller('auth')
    class Login {
      constructor(@Inject(RateWindowService) private readonly limits: RateWindowService) {}

      @Post('login')
      @RateLimit({ name: 'login', limit: 3, window: '15m' })
      async login(@Req() req: { headers: Record<string, string> }) {
        if (req.headers['x-password'] === 'right') await this.limits.reset(req, { name: 'login' })
        return 'done'
      }
    }
    const { url, get } = await start(
      platform,
      appModule({ limiters: [{ name: 'api', limit: 5, window: '1m' }] }, [Login, AController]),
    )
    await request(url).post('/auth/login').expect(201)
    await request(url).post('/auth/login').set('X-Password', 'right').expect(201) // forgets the login attempts
    for (let i = 0; i < 3; i++) await request(url).post('/auth/login').expect(201) // the login budget is whole again
    // The app's budget counted all five: the login reset did not touch it.
    await request(url).get('/a/one').expect(429)
    const service = get(RateWindowService)
    await expect(service.reset({ headers: {}, ip: '127.0.0.1' }, { name: 'logni' })).rejects.toMatchObject({
      code: 'ERR_RATEWINDOW_UNKNOWN_LIMITER',
      message: expect.stringMatching(/'logni'.*'api', 'login'/),
    })
    await expect(service.resetKey('127.0.0.1', { name: 'logni' })).rejects.toMatchObject({
      code: 'ERR_RATEWINDOW_UNKNOWN_LIMITER',
    })
  })

  it('bad @RateLimit() options fail when the app starts, naming the option', async () => {
    @Controller()
    class Bad {
      @Get()
      @RateLimit({ window: '1x' as never })
      root() {
        return 'ok'
      }
    }
    await expect(start(platform, appModule({}, [Bad]))).rejects.toThrow(/`window`/)
  })

  it('@UseGuards() on one controller: only its routes are limited', async () => {
    @Controller('guarded')
    @UseGuards(RateWindowGuard)
    class Guarded {
      @Get()
      root() {
        return 'guarded'
      }
    }
    @Controller('open')
    class Open {
      @Get()
      root() {
        return 'open'
      }
    }
    @Module({ imports: [RateWindowModule.forRoot({ limit: 1 })], controllers: [Guarded, Open] })
    class AppModule {}
    const { url } = await start(platform, AppModule)
    await request(url).get('/guarded').expect(200)
    await request(url).get('/guarded').expect(429)
    for (let i = 0; i < 3; i++) await request(url).get('/open').expect(200, 'open')
  })

  it("the refusal is a RateLimitException through the app's filters, headers already set", async () => {
    @Catch(RateLimitException)
    class Friendly implements ExceptionFilter {
      catch(exception: RateLimitException, host: ArgumentsHost) {
        const response = host.switchToHttp().getResponse()
        const body = JSON.stringify({ friendly: true, retryAfterMs: exception.result.retryAfter })
        // Express's `res` and Fastify's `reply` both have status(); then send the JSON each its way.
        response.status(exception.getStatus())
        if (platform === 'fastify') response.type('application/json').send(body)
        else response.type('json').send(body)
      }
    }
    @Module({
      imports: [RateWindowModule.forRoot({ limit: 1 })],
      controllers: [AController],
      providers: [globalGuard, { provide: 'APP_FILTER', useClass: Friendly }],
    })
    class AppModule {}
    const { url } = await start(platform, AppModule)
    await request(url).get('/a/one').expect(200)
    const refused = await request(url).get('/a/one').expect(429)
    expect(refused.body).toMatchObject({ friendly: true })
    expect(refused.body.retryAfterMs).toBeGreaterThan(0)
    expect(refused.headers['retry-after']).toBeDefined()
    expect(refused.headers['ratelimit-remaining']).toBe('0')
  })

  it('forRootAsync takes the options from a factory with injected providers', async () => {
    @Injectable()
    class Config {
      readonly limit = 1
    }
    @Module({ providers: [Config], exports: [Config] })
    class ConfigModule {}
    @Module({
      imports: [
        RateWindowModule.forRootAsync({
          imports: [ConfigModule],
          inject: [Config],
          useFactory: (config: Config) => ({ limit: config.limit, window: '1m' }),
        }),
      ],
      controllers: [AController],
      providers: [globalGuard],
    })
    class AppModule {}
    const { url } = await start(platform, AppModule)
    expect((await request(url).get('/a/one').expect(200)).headers['ratelimit-limit']).toBe('1')
    await request(url).get('/a/one').expect(429)
  })

  it('RateWindowService is injectable and forgets a client (every limiter, or one name)', async () => {
    @Controller('auth')
    class Auth {
      constructor(@Inject(RateWindowService) private readonly limits: RateWindowService) {}

      @Post('login')
      @SkipRateLimit()
      async login(@Req() req: { headers: Record<string, string> }) {
        if (req.headers['x-password'] === 'right') await this.limits.reset(req)
        return 'done'
      }
    }
    const { url, get } = await start(platform, appModule({ limit: 2 }, [Auth, AController]))
    await request(url).get('/a/one').expect(200)
    await request(url).get('/a/one').expect(200)
    await request(url).get('/a/one').expect(429)
    await request(url).post('/auth/login').expect(201)
    await request(url).get('/a/one').expect(429)
    await request(url).post('/auth/login').set('X-Password', 'right').expect(201)
    await request(url).get('/a/one').expect(200)
    await request(url).get('/a/one').expect(200)
    await request(url).get('/a/one').expect(429)
    await get(RateWindowService).resetKey('127.0.0.1', { name: 'default' })
    await request(url).get('/a/one').expect(200)
    await expect(get(RateWindowService).resetKey('127.0.0.1', { name: 'nope' })).rejects.toThrow(/nope/)
  })

  it('a key per user: a global auth guard provided before RateWindowGuard runs first (the README recipe)', async () => {
    @Injectable()
    class Auth implements CanActivate {
      canActivate(context: ExecutionContext) {
        const req = context.switchToHttp().getRequest()
        if (req.headers.authorization) req.user = { id: req.headers.authorization }
        return true
      }
    }
    @Module({
      imports: [
        RateWindowModule.forRoot({
          limit: 1,
          key: (req) => (req.user ? `user:${req.user.id}` : `ip:${req.ip}`),
        }),
      ],
      controllers: [AController],
      providers: [{ provide: APP_GUARD, useClass: Auth }, globalGuard],
    })
    class AppModule {}
    const { url } = await start(platform, AppModule)
    await request(url).get('/a/one').set('Authorization', 'alice').expect(200)
    await request(url).get('/a/one').set('Authorization', 'bob').expect(200)
    await request(url).get('/a/one').set('Authorization', 'alice').expect(429)
    await request(url).get('/a/one').expect(200) // anonymous: keyed by address
  })

  it('the middleware form limits every request, 404s included; the guard never sees a 404', async () => {
    @Module({ imports: [RateWindowModule.forRoot({ limit: 2 })], controllers: [AController] })
    class WithMiddleware implements NestModule {
      configure(consumer: MiddlewareConsumer) {
        consumer.apply(RateWindowMiddleware).forRoutes('*')
      }
    }
    let { url } = await start(platform, WithMiddleware)
    await request(url).get('/nope').expect(404)
    const second = await request(url).get('/nope').expect(404)
    expect(second.headers['ratelimit-remaining']).toBe('0')
    await request(url).get('/nope').expect(429)
    await request(url).get('/a/one').expect(429)
    await running!.close()
    ;({ url } = await start(platform, appModule({ limit: 2 })))
    for (let i = 0; i < 4; i++) await request(url).get('/nope').expect(404)
    await request(url).get('/a/one').expect(200)
  })

  it('stores are closed when the app shuts down', async () => {
    const closed: string[] = []
    const store = new MemoryStore()
    const tracked: Store = Object.assign(Object.create(store) as Store, {
      close: () => {
        closed.push('store')
        store.close()
      },
    })
    const app = await start(platform, appModule({ limit: 5, store: tracked }))
    await request(app.url).get('/a/one').expect(200)
    await app.close()
    running = undefined
    expect(closed).toEqual(['store'])
  })
})

describe('other contexts', () => {
  it('the guard lets GraphQL, WebSocket and RPC contexts pass without a decision', async () => {
    const moduleRef = await Test.createTestingModule({
      imports: [RateWindowModule.forRoot({ limit: 1 })],
    }).compile()
    const guard = moduleRef.get(RateWindowGuard)
    for (const type of ['rpc', 'ws', 'graphql']) {
      const context = {
        getType: () => type,
        getClass: () => AController,
        getHandler: () => AController.prototype.one,
        switchToHttp: () => {
          throw new Error('not HTTP')
        },
      } as unknown as ExecutionContext
      expect(guard.canActivate(context)).toBe(true)
      expect(guard.canActivate(context)).toBe(true)
    }
    await moduleRef.close()
  })
})
