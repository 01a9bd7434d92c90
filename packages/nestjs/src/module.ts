import {
  createParamDecorator,
  type DynamicModule,
  type ExecutionContext,
  Inject,
  Injectable,
  type InjectionToken,
  Module,
  type ModuleMetadata,
  Optional,
  type OptionalFactoryDependency,
} from '@nestjs/common'
import { DiscoveryModule, DiscoveryService, HttpAdapterHost } from '@nestjs/core'
import type { RateLimitResult } from '@ratewindow/core'
import { RateWindowGuard, RateWindowMiddleware } from './guard.js'
import { moduleLimiters, type RateWindowModuleOptions } from './options.js'
import { RATEWINDOW_OPTIONS, RateWindowService } from './service.js'

// Written without decorator syntax, so that the package builds under any decorator setting; the same metadata
// as `@Injectable()` and `@Inject(token)` on each constructor parameter.
Injectable()(RateWindowService)
Inject(RATEWINDOW_OPTIONS)(RateWindowService, undefined, 0)
Inject(HttpAdapterHost)(RateWindowService, undefined, 1)
Optional()(RateWindowService, undefined, 1)
Inject(DiscoveryService)(RateWindowService, undefined, 2)
Optional()(RateWindowService, undefined, 2)
Injectable()(RateWindowGuard)
Inject(RateWindowService)(RateWindowGuard, undefined, 0)
Injectable()(RateWindowMiddleware)
Inject(RateWindowService)(RateWindowMiddleware, undefined, 0)

/** `RateWindowModule.forRootAsync()`: the options from a factory, e.g. from `ConfigService`. */
export interface RateWindowModuleAsyncOptions extends Pick<ModuleMetadata, 'imports'> {
  useFactory: (...args: never[]) => RateWindowModuleOptions | Promise<RateWindowModuleOptions>
  inject?: (InjectionToken | OptionalFactoryDependency)[]
}

/**
 * The module: `RateWindowModule.forRoot({ limit: 100, window: '1m' })` (global: import it once, in the root
 * module), with the guard bound where it applies: `{ provide: APP_GUARD, useClass: RateWindowGuard }` for every
 * route, or `@UseGuards(RateWindowGuard)`. Provides `RateWindowService` (resets) and `RateWindowMiddleware`.
 */
// biome-ignore lint/complexity/noStaticOnlyClass: a Nest module is a class, its dynamic forms static methods
export class RateWindowModule {
  static forRoot(options: RateWindowModuleOptions = {}): DynamicModule {
    // Checked now (shape and names); each limiter's options are checked when the app initialises.
    moduleLimiters(options)
    return RateWindowModule.#module([{ provide: RATEWINDOW_OPTIONS, useValue: options }], [])
  }

  static forRootAsync(options: RateWindowModuleAsyncOptions): DynamicModule {
    if (typeof options?.useFactory !== 'function') {
      throw new TypeError(
        'RateWindowModule.forRootAsync() needs `useFactory`, a function returning the options.',
      )
    }
    const { useFactory, inject = [], imports = [] } = options
    return RateWindowModule.#module([{ provide: RATEWINDOW_OPTIONS, useFactory, inject }], imports)
  }

  static #module(
    providers: NonNullable<ModuleMetadata['providers']>,
    imports: NonNullable<ModuleMetadata['imports']>,
  ): DynamicModule {
    return {
      module: RateWindowModule,
      global: true,
      imports: [DiscoveryModule, ...imports],
      providers: [...providers, RateWindowService, RateWindowGuard, RateWindowMiddleware],
      exports: [RATEWINDOW_OPTIONS, RateWindowService, RateWindowGuard, RateWindowMiddleware],
    }
  }
}
Module({})(RateWindowModule)

/**
 * A handler parameter: the request's decision (`request.rateLimit`), or undefined when no limiter decided
 * (skipped, exempt, `enabled: false`). With several limiters, the last one's.
 */
export const RateLimitInfo: () => ParameterDecorator = createParamDecorator(
  (_data: unknown, context: ExecutionContext): RateLimitResult | undefined =>
    context.switchToHttp().getRequest<{ rateLimit?: RateLimitResult }>().rateLimit,
)
