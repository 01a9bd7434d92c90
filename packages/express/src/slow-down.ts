import type { SlowDownInfo, SlowDownOptions } from '@ratewindow/core'
import { type SlowDownDecision, SlowDownEngine, type SlowDownRefusal } from '@ratewindow/core/adapter'
import { invalid } from '@ratewindow/core/support'
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
 * rest of the chain never runs. Past `maxPerKey` (10) or `maxWaiting` (1000) delayed requests waiting at once,
 * one more is answered 429 (`false` for express-slow-down's unbounded waiting).
 * @example app.use(slowDown({ windowMs: 15 * 60 * 1000, delayAfter: 5, delayMs: (used) => (used - 5) * 100 }))
 */
export function slowDown(options: ExpressSlowDownOptions = {}): SlowDownMiddleware {
  const engine = new SlowDownEngine<Request, [Request, Response]>(options, binding, ['requestPropertyName'])
  const property = options.requestPropertyName ?? 'slowDown'
  if (typeof property !== 'string' || property === '')
    throw invalid('ERR_RATEWINDOW_INVALID_OPTION', 'requestPropertyName', property, 'a property name')

  const middleware: RequestHandler = function slowDownMiddleware(request, response, next) {
    const args: [Request, Response] = [request, response]
    const own = request as unknown as Record<string, unknown>
    const go = (decided: SlowDownDecision<Request> | undefined) => {
      if (decided === undefined) {
        next()
        return
      }
      own[property] = decided.info
      if (decided.refusal !== undefined) refuse(response, decided.refusal)
      else
        engine.proceed(decided, args, response, (late) =>
          late === undefined ? next() : refuse(response, late),
        )
    }
    try {
      own[property] = undefined
    } catch {
      // A property Express defines without a setter (`ip`, `path`, …): said before the request is counted, so
      // that it holds no place among the delayed requests.
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

/**
 * Answers a request refused past the bounds on delayed requests, or at the end of its delay on a stalled
 * connection: 429, Retry-After, the default body.
 */
function refuse(response: Response, { statusCode, headers, contentType, payload }: SlowDownRefusal): void {
  response.status(statusCode).set(headers).type(contentType).send(payload)
}
