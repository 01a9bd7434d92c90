import { Reflector } from '@nestjs/core'
import { invalid, requireObject } from '@ratewindow/core/support'
import type { RouteRateWindowOptions } from './options.js'

export const RATE_LIMIT_METADATA = 'ratewindow:rate-limit'
export const SKIP_RATE_LIMIT_METADATA = 'ratewindow:skip'

/** Reads metadata without the DI container (`Reflector` keeps no state). */
export const reflector = new Reflector()

/** Where a class or method decorator keeps its metadata: the class, or the method's function. */
// biome-ignore lint/complexity/noBannedTypes: Nest keys handler metadata by the method's function
function targetOf(target: object, descriptor?: PropertyDescriptor): Function {
  // biome-ignore lint/complexity/noBannedTypes: as above
  return (descriptor?.value ?? target) as Function
}

/**
 * Limits a controller (every handler, one counter for the controller) or a handler (its own counter), with
 * options merged over the module's limiter of the same `name` (see `RouteRateWindowOptions`). Stack one per
 * named limiter. Needs the guard where it applies: global (`APP_GUARD`) or `@UseGuards(RateWindowGuard)`.
 */
export function RateLimit(options: RouteRateWindowOptions = {}): ClassDecorator & MethodDecorator {
  requireObject(options, '@RateLimit()', "{ limit: 5, window: '1m' }")
  return (target: object, _key?: string | symbol, descriptor?: PropertyDescriptor) => {
    const where = targetOf(target, descriptor)
    const list = (
      reflector.get<RouteRateWindowOptions[] | undefined>(RATE_LIMIT_METADATA, where) ?? []
    ).slice()
    // Decorators apply bottom-up: keep them in the order they are written.
    list.unshift(options)
    Reflect.defineMetadata(RATE_LIMIT_METADATA, list, where)
  }
}

/**
 * Exempts a controller or a handler from every limiter, or from the named ones
 * (`@SkipRateLimit('burst')`). No store call, no headers, `request.rateLimit` unset. A name no limiter of the
 * app has (a typo) is refused when the app starts (`ERR_RATEWINDOW_UNKNOWN_LIMITER`).
 */
export function SkipRateLimit(...names: string[]): ClassDecorator & MethodDecorator {
  for (const name of names) {
    if (typeof name !== 'string' || name === '') {
      throw invalid(
        'ERR_RATEWINDOW_INVALID_OPTION',
        '@SkipRateLimit()',
        name,
        'limiter names, or none for all',
      )
    }
  }
  return (target: object, _key?: string | symbol, descriptor?: PropertyDescriptor) => {
    const where = targetOf(target, descriptor)
    const known = reflector.get<true | string[] | undefined>(SKIP_RATE_LIMIT_METADATA, where)
    const value: true | string[] = names.length === 0 || known === true ? true : [...(known ?? []), ...names]
    Reflect.defineMetadata(SKIP_RATE_LIMIT_METADATA, value, where)
  }
}
