import { Controller, type DynamicModule, Get, HttpCode, Module, Post } from '@nestjs/common'
import { APP_GUARD } from '@nestjs/core'
import {
  RateLimit,
  RateLimitInfo,
  type RateLimitResult,
  RateWindowGuard,
  RateWindowModule,
  type RateWindowModuleOptions,
  SkipRateLimit,
  slidingWindowLog,
} from '@ratewindow/nestjs'

@Controller()
class AppController {
  @Get()
  hello(@RateLimitInfo() decision: RateLimitResult | undefined) {
    return { hello: 'world', remaining: decision?.remaining }
  }

  @Post('login')
  @HttpCode(200)
  // Its own counter, exact: 3 per minute with a sliding window log.
  @RateLimit({ rules: slidingWindowLog({ limit: 3, window: '1m' }) })
  login() {
    return { ok: true }
  }

  @Get('health')
  @SkipRateLimit()
  health() {
    return 'up'
  }
}

/** The app: every client gets 5 requests per 10 seconds across the routes, POST /login 3 per minute. */
export function appModule(store: RateWindowModuleOptions['store']): DynamicModule {
  @Module({
    imports: [RateWindowModule.forRoot({ limit: 5, window: '10s', store })],
    controllers: [AppController],
    providers: [{ provide: APP_GUARD, useClass: RateWindowGuard }],
  })
  class AppModule {}
  return { module: AppModule }
}
