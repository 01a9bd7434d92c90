import {
  invalid,
  type SlowDownDecision,
  SlowDownEngine,
  type SlowDownInfo,
  type SlowDownOptions,
} from '@ratewindow/core'
import type { Request, RequestHandler, Response } from 'express'
import { binding } from './binding.js'

declare global {
  namespace Express {
    interface Request {
      /** What `slowDown()` decided for this request (`requestPropertyName` moves it). */
      slowDown?: SlowDownInfo
    }
  }
}

/**
 * express-slow-down 2's options, on ratewindow's stores: callbacks take `(req, res)` (`delayMs` takes
 * `(used, req, res)`), as there.
 */
export interface ExpressSlowDownOptions extends SlowDownOptions<[Request, Response]> {
  /** The request property the info goes on. @default 'slowDown' */
  requestPropertyName?: string
}

/** The middleware, with a handle to forget a client's count. */
export interface SlowDownMiddleware extends RequestHandler {
  /** Forgets `key`'s count. Rejects on a store error. */
  resetKey(key: string): Promise<void>
  /** Call when the app goes: gives up the counters, and closes the memory store made for itself. */
  close(): void
}

/**
 * Express middleware (Express 4 and 5) that delays instead of refusing, as express-slow-down 2 does: every request
 * is counted in `windowMs`; those after the first `delayAfter` wait `delayMs`, at most `maxDelayMs`. Switch
 * from express-slow-down by changing the import. `req.slowDown` holds `limit`, `used`, `remaining`,
 * `resetTime` and `delay`. No RateLimit headers are sent. A client that leaves while delayed is dropped: the
 * rest of the chain never runs.
 * @example app.use(slowDown({ windowMs: 15 * 60 * 1000, delayAfter: 5, delayMs: (used) => (used - 5) * 100 }))
 */
export function slowDown(options: ExpressSlowDownOptions = {}): SlowDownMiddleware {
  const engine = new SlowDownEngine<Request, [Request, Response]>(options, binding, ['requestPropertyName'])
  const property = options.requestPropertyName ?? 'slowDown'
  if (typeof property !== 'string' || property === '')
    throw invalid('ERR_RATEWINDOW_INVALID_OPTION', 'requestPropertyName', property, 'a property name')

  const middleware: RequestHandler = function slowDownMiddleware(request, response, next) {
    const args: [Request, Response] = [request, response]
    const go = (decided: SlowDownDecision | undefined) => {
      if (decided === undefined) {
        next()
        return
      }
      try {
        ;(request as unknown as Record<string, unknown>)[property] = decided.info
      } catch {
        // A property Express defines without a setter (`ip`, `path`, …): said here, whether the decision was
        // made at once or arrived later (where a throw would be an unhandled rejection and a hung request).
        next(
          invalid(
            'ERR_RATEWINDOW_INVALID_OPTION',
            'requestPropertyName',
            property,
            'a property the request can take, not one Express defines (such as `ip` or `path`)',
          ),
        )
        return
      }
      engine.proceed(decided, args, response, () => next())
    }
    try {
      const decided = engine.decide(request, args)
      if (decided instanceof Promise) decided.then(go, next)
      else go(decided)
    } catch (error) {
      next(error)
    }
  }
  return Object.assign(middleware, {
    resetKey: (key: string) => engine.resetKey(key),
    close: () => engine.close(),
  })
}
