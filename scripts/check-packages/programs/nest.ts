/** Typecheck programs of @ratewindow/nestjs: the module and guard, @nestjs/throttler's storage, the gateway guard. */

/** A Nest app as Nest projects write one: constructor injection by type (decorator metadata), the decorators. */
export const NEST_PROGRAM = `import { Controller, Get, Module, Post, Req } from '@nestjs/common'
import { APP_GUARD } from '@nestjs/core'
import {
  type NestHttpRequest,
  RateLimit,
  RateLimitException,
  RateLimitInfo,
  type RateLimitResult,
  RateWindowGuard,
  RateWindowModule,
  RateWindowService,
  SkipRateLimit,
  slidingWindowLog,
} from '@ratewindow/nestjs'

@Controller()
export class AppController {
  constructor(private readonly limits: RateWindowService) {}

  @Get()
  hello(@RateLimitInfo() decision: RateLimitResult | undefined): { remaining: number | undefined } {
    return { remaining: decision?.remaining }
  }

  @Post('login')
  @RateLimit({ rules: slidingWindowLog({ limit: 5, window: '15m' }) })
  async login(@Req() request: NestHttpRequest): Promise<string> {
    await this.limits.reset(request)
    return 'ok'
  }

  @Get('health')
  @SkipRateLimit()
  health(): string {
    return 'up'
  }
}

@Module({
  imports: [
    RateWindowModule.forRootAsync({
      useFactory: () => ({ limit: 100, window: '1m', perRoute: false }),
    }),
  ],
  controllers: [AppController],
  providers: [{ provide: APP_GUARD, useClass: RateWindowGuard }],
})
export class AppModule {}

export const statusOf = (error: unknown): number | undefined =>
  error instanceof RateLimitException ? error.getStatus() : undefined
`

/** @nestjs/throttler as it is, on our storage: `ThrottlerStore` fits its `storage` option. */
export const NEST_THROTTLER_PROGRAM = `import { Module } from '@nestjs/common'
import { ThrottlerModule } from '@nestjs/throttler'
import { ThrottlerStore } from '@ratewindow/nestjs/throttler'

@Module({
  imports: [ThrottlerModule.forRoot({ throttlers: [{ limit: 10, ttl: 60_000 }], storage: new ThrottlerStore() })],
})
export class AppModule {}
`

/** A gateway limited by `@ratewindow/nestjs/websockets` (Nest 12): the entry resolves with @nestjs/websockets alone. */
export const NEST_WEBSOCKETS_PROGRAM = `import type { IncomingMessage } from 'node:http'
import { Module, UseGuards } from '@nestjs/common'
import { MessageBody, SubscribeMessage, WebSocketGateway } from '@nestjs/websockets'
import { RateLimit, RateWindowModule } from '@ratewindow/nestjs'
import { RateWindowWsGuard, RateWindowWsModule, rememberHandshake } from '@ratewindow/nestjs/websockets'

@WebSocketGateway()
@UseGuards(RateWindowWsGuard)
class ChatGateway {
  handleConnection(client: object, request: IncomingMessage) {
    rememberHandshake(client, request)
  }

  @RateLimit({ limit: 20, window: '10s' })
  @SubscribeMessage('chat')
  chat(@MessageBody() text: string) {
    return { echo: text }
  }
}

@Module({
  imports: [RateWindowModule.forRoot({ limit: 100, window: '1m' }), RateWindowWsModule.forRoot({ onLimit: 'drop' })],
  providers: [ChatGateway],
})
export class AppModule {}
`
