import type { SlowDownInfo, SlowDownOptions } from '@ratewindow/core'
import {
  INVALID_ADDRESS,
  SlowDownEngine,
  type SlowDownRefusal,
  unlessInvalidAddress,
} from '@ratewindow/core/adapter'
import type { Handle, RequestEvent } from '@sveltejs/kit'
import { ADDRESS_NAMES, addressSource, type KitAddressOptions } from './address.js'
import {
  invalidAddressResponse,
  kitBinding,
  noteResponse,
  prerendering,
  routeResponse,
  withRouteResponse,
} from './binding.js'

/** What `slowDown()` puts on `event.locals`: declare it in `src/app.d.ts` as for `RateLimitLocals`. */
export interface SlowDownLocals {
  /** What `slowDown()` decided for this request; undefined when it was skipped. */
  slowDown?: SlowDownInfo
}

/**
 * express-slow-down 2's options, on ratewindow's stores; callbacks take `(event)` (`delayMs` takes `(used,
 * event)`). The client address is `event.getClientAddress()`, as for `rateLimit()`.
 */
export interface KitSlowDownOptions extends SlowDownOptions<[RequestEvent], Response>, KitAddressOptions {}

/** The `handle` hook, with a handle to forget a client's count. */
export type SlowDownHandle = Handle & {
  /** Forgets `key`'s count. Rejects on a store error. */
  resetKey(key: string): Promise<void>
  /** Call when the app goes: gives up the counters, and closes the memory store made for itself. */
  close(): void
}

/**
 * A `handle` hook that delays instead of refusing (express-slow-down 2's model): every request is counted in
 * `windowMs`; those after the first `delayAfter` wait `delayMs`, at most `maxDelayMs`, before the route runs.
 * `event.locals.slowDown` holds `limit`, `used`, `remaining`, `resetTime` and `delay`; no RateLimit headers are
 * sent. A client that leaves while delayed is dropped: its route never runs. Past `maxPerKey` (10) or `maxWaiting`
 * (1000) delayed requests waiting at once, one more is answered 429.
 */
export function slowDown(options: KitSlowDownOptions = {}): SlowDownHandle {
  const binding = kitBinding(addressSource(options), options, [], 'slowDown()')
  const engine = new SlowDownEngine<RequestEvent, [RequestEvent], Response>(
    withRouteResponse(options),
    binding,
    ADDRESS_NAMES,
  )

  const slowDownHandle: Handle = async ({ event, resolve }) => {
    // A sub-request is part of a request counted already; at build time, no client sends the request.
    if (event.isSubRequest || prerendering(event)) return resolve(event)
    const args: [RequestEvent] = [event]
    const pending = unlessInvalidAddress(engine.decide(event, args), 'answered 500')
    const decided = pending instanceof Promise ? await pending : pending
    if (decided === INVALID_ADDRESS) return invalidAddressResponse()
    if (decided === undefined) return resolve(event)
    ;(event.locals as SlowDownLocals).slowDown = decided.info
    const answer = (refusal: SlowDownRefusal) =>
      new Response(refusal.payload, {
        status: refusal.statusCode,
        headers: { ...refusal.headers, 'Content-Type': refusal.contentType },
      })
    if (decided.refusal !== undefined) return answer(decided.refusal)
    const response = routeResponse(event)
    // true: on to the route; false: the client left; a refusal: refused at the end of its delay.
    const admitted = await new Promise<boolean | SlowDownRefusal>((admit) =>
      engine.proceed(
        decided,
        args,
        response,
        (late) => admit(late ?? true),
        () => admit(false),
      ),
    )
    // The client left while delayed: nothing runs for it, and nobody reads this answer.
    if (admitted === false) return new Response(null, { status: 499 })
    if (admitted !== true) return answer(admitted)
    let made: Response | undefined
    try {
      made = await resolve(event)
      noteResponse(event, made)
      return made
    } finally {
      response.finish(made?.status ?? 500)
    }
  }
  return Object.assign(slowDownHandle, {
    resetKey: (key: string) => engine.resetKey(key),
    close: () => engine.close(),
  })
}
