import type { SlowDownInfo, SlowDownOptions } from '@ratewindow/core'
import {
  INVALID_ADDRESS,
  SlowDownEngine,
  type SlowDownRefusal,
  unlessInvalidAddress,
} from '@ratewindow/core/adapter'
import type { H3Event } from 'h3'
import {
  ADDRESS_NAMES,
  addressSource,
  errorStatus,
  type H3AddressOptions,
  h3Binding,
  invalidAddressResponse,
  responseOf,
  statusOf,
} from './binding.js'
import { deferOf, type H3EventLike } from './event.js'

/** What `slowDown()` puts on `event.context`: `event.context.slowDown` (undefined when skipped). */
export interface SlowDownContext {
  /** What `slowDown()` decided for this request, set by `@ratewindow/h3`. */
  slowDown?: SlowDownInfo
}

/** express-slow-down 2's options, on ratewindow's stores; callbacks take `(event)` (`delayMs`: `(used, event)`). */
export interface H3SlowDownOptions<E extends H3EventLike = H3Event>
  extends SlowDownOptions<[E], unknown>,
    H3AddressOptions<E> {}

/** The middleware, with a handle to forget a client's count. */
export type SlowDownMiddleware<E extends H3EventLike = H3Event> = ((
  event: E,
  next?: () => unknown,
) => Promise<unknown>) & {
  /** Forgets `key`'s count. Rejects on a store error. */
  resetKey(key: string): Promise<void>
  /** Call when the app goes: gives up the counters, and closes the memory store made for itself. */
  close(): void
}

/**
 * Middleware that delays instead of refusing (express-slow-down 2's model), for h3 2 and 1 as `rateLimit()`: every
 * request is counted in `windowMs`; those after the first `delayAfter` wait `delayMs`, at most `maxDelayMs`, before
 * the rest of the chain. `event.context.slowDown` holds the decision; no RateLimit headers are sent. A client that
 * leaves while delayed is dropped. Past `maxPerKey` (10) or `maxWaiting` (1000) delayed requests at once: 429.
 */
export function slowDown<E extends H3EventLike = H3Event>(
  options: H3SlowDownOptions<E> = {},
): SlowDownMiddleware<E> {
  const binding = h3Binding<E>(addressSource(options), options, 'slowDown()')
  const engine = new SlowDownEngine<E, [E], unknown>(options, binding, ADDRESS_NAMES)

  async function slowDownMiddleware(event: E, next?: () => unknown): Promise<unknown> {
    const args: [E] = [event]
    const decided = await unlessInvalidAddress(engine.decide(event, args), 'answered 500')
    if (decided === INVALID_ADDRESS) return invalidAddressResponse()
    if (decided === undefined) return next?.()
    ;(event.context as SlowDownContext).slowDown = decided.info
    const answer = (refusal: SlowDownRefusal) =>
      new Response(refusal.payload, {
        status: refusal.statusCode,
        headers: { ...refusal.headers, 'Content-Type': refusal.contentType },
      })
    if (decided.refusal !== undefined) return answer(decided.refusal)
    const response = responseOf(event)
    // true: on with the chain; false: the client left; a refusal: refused at the end of its delay.
    const admitted = await new Promise<boolean | SlowDownRefusal>((admit) =>
      engine.proceed(
        decided,
        args,
        response,
        (late) => admit(late ?? true),
        () => admit(false),
        deferOf(event),
      ),
    )
    // The client left while delayed: nothing runs for it, and nobody reads this answer.
    if (admitted === false) return new Response(null, { status: 499 })
    if (admitted !== true) return answer(admitted)
    if (response.finish === undefined) return next?.()
    let status = 500
    try {
      const body = await next?.()
      status = statusOf(event, body)
      return body
    } catch (error) {
      status = errorStatus(error)
      throw error
    } finally {
      response.finish(status)
    }
  }
  Object.assign(slowDownMiddleware, { __is_handler__: true })
  return Object.assign(slowDownMiddleware, {
    resetKey: (key: string) => engine.resetKey(key),
    close: () => engine.close(),
  })
}
