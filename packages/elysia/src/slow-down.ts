import type { SlowDownInfo, SlowDownOptions } from '@ratewindow/core'
import {
  INVALID_ADDRESS,
  SlowDownEngine,
  type SlowDownRefusal,
  unlessInvalidAddress,
} from '@ratewindow/core/adapter'
import { Elysia, status } from 'elysia'
import {
  ADDRESS_NAMES,
  type ElysiaAddressOptions,
  elysiaBinding,
  handlerResponse,
  INVALID_ADDRESS_ANSWER,
  invalidAddressAnswer,
  outcomeHooks,
  pluginSeed,
  type RateLimitContext,
  type ScopedPlugin,
} from './binding.js'

/**
 * express-slow-down 2's options, on ratewindow's stores; callbacks take `(ctx)` (`delayMs` takes `(used, ctx)`).
 * The client is the connection's address, or behind proxies `trustProxy`, as for `rateLimit()`.
 */
export interface ElysiaSlowDownOptions
  extends SlowDownOptions<[RateLimitContext], Response>,
    ElysiaAddressOptions {}

/** `slowDown()` with a handle to forget a client's count, and `close`. */
export type SlowDownPlugin = ScopedPlugin<{ readonly slowDown: SlowDownInfo | undefined }> & {
  /** Forgets `key`'s count. Rejects on a store error. */
  resetKey(key: string): Promise<void>
  /** Call when the app goes: gives up the counters, and closes the memory store made for itself. */
  close(): void
}

/**
 * An Elysia plugin that delays instead of refusing (express-slow-down 2's model): every request is counted in
 * `windowMs`; those after the first `delayAfter` wait `delayMs`, at most `maxDelayMs`, before their handler.
 * `ctx.slowDown` holds `limit`, `used`, `remaining`, `resetTime` and `delay`. No RateLimit headers are sent. A
 * client that leaves while delayed is dropped: its handler never runs. Past `maxPerKey` (10) or `maxWaiting`
 * (1000) delayed requests waiting at once, one more is answered 429 without its handler.
 */
export function slowDown(options: ElysiaSlowDownOptions = {}): SlowDownPlugin {
  const binding = elysiaBinding(
    options,
    ADDRESS_NAMES,
    'pass `trustProxy` to slowDown() (the number of proxies in front of the app, or their addresses)',
  )
  const engine = new SlowDownEngine<RateLimitContext, [RateLimitContext], Response>(
    options,
    binding,
    ADDRESS_NAMES,
  )
  return Object.assign(slowDownPlugin(engine), {
    resetKey: (key: string) => engine.resetKey(key),
    close: () => engine.close(),
  })
}

function slowDownPlugin(
  engine: SlowDownEngine<RateLimitContext, [RateLimitContext], Response>,
): ScopedPlugin<{ readonly slowDown: SlowDownInfo | undefined }> {
  const tracked = new WeakMap<Request, ReturnType<typeof handlerResponse>>()
  const outcome = outcomeHooks(tracked)
  const answer = (set: RateLimitContext['set'], refusal: SlowDownRefusal) => {
    Object.assign(set.headers, refusal.headers)
    const headers = { 'content-type': refusal.contentType }
    return status(refusal.statusCode, new Response(refusal.payload, { headers }))
  }
  // NOTE: the hooks name the fields they read and take the context whole as `arguments[0]` (see index.ts).
  const plugin = new Elysia({ name: '@ratewindow/elysia/slow-down', seed: pluginSeed() })
    .derive(
      { as: 'scoped' },
      // biome-ignore lint/correctness/noUnusedFunctionParameters: named for Elysia's inference, read through `ctx`.
      async function slowDownDelay({ request, server, set, route, path }) {
        // biome-ignore lint/complexity/noArguments: a parameter would have Elysia parse every field.
        const ctx = arguments[0] as RateLimitContext
        const args: [RateLimitContext] = [ctx]
        const decided = await unlessInvalidAddress(engine.decide(ctx, args), INVALID_ADDRESS_ANSWER)
        if (decided === INVALID_ADDRESS) return invalidAddressAnswer()
        if (decided === undefined) return { slowDown: (ctx as { slowDown?: SlowDownInfo }).slowDown }
        if (decided.refusal !== undefined) return answer(set, decided.refusal)
        const response = handlerResponse(request)
        // true: on to the handler; false: the client left; a refusal: refused at the end of its delay (a stalled
        // connection).
        const admitted = await new Promise<boolean | SlowDownRefusal>((resolve) =>
          engine.proceed(
            decided,
            args,
            response,
            (late) => resolve(late ?? true),
            () => resolve(false),
          ),
        )
        // The client left while delayed: nothing runs for it, and nobody reads this answer.
        if (admitted === false) return status(499)
        if (admitted !== true) return answer(set, admitted)
        tracked.set(request, response)
        return { slowDown: decided.info as SlowDownInfo | undefined }
      },
    )
    .onAfterResponse({ as: 'scoped' }, outcome.afterResponse)
    .onError({ as: 'scoped' }, outcome.error)
    .onStop(() => engine.close())
  return plugin as unknown as ScopedPlugin<{ readonly slowDown: SlowDownInfo | undefined }>
}
