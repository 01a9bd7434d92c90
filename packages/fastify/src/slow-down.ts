import type { SlowDownInfo, SlowDownOptions } from '@ratewindow/core'
import { type SlowDownDecision, SlowDownEngine, type SlowDownRefusal } from '@ratewindow/core/adapter'
import type { FastifyReply, FastifyRequest, onRequestHookHandler } from 'fastify'
import { binding } from './binding.js'

declare module 'fastify' {
  interface FastifyRequest {
    /** What `slowDown()` decided for this request, set by `@ratewindow/fastify` (undefined when skipped). */
    slowDown?: SlowDownInfo
  }
}

/**
 * express-slow-down 2's options, on ratewindow's stores; callbacks take `(request, reply)` (`delayMs` takes
 * `(used, request, reply)`).
 */
export type FastifySlowDownOptions = SlowDownOptions<[FastifyRequest, FastifyReply]>

/** The hook, with a handle to forget a client's count. */
export interface SlowDownHook extends onRequestHookHandler {
  /** Forgets `key`'s count. Rejects on a store error. */
  resetKey(key: string): Promise<void>
  /** Call when the app goes: gives up the counters, and closes the memory store made for itself. */
  close(): void
}

/**
 * A Fastify hook (Fastify 4 and 5) that delays instead of refusing (express-slow-down 2's model): every request
 * is counted in `windowMs`; those after the first `delayAfter` wait `delayMs`, at most `maxDelayMs`.
 * `app.addHook('onRequest', slowDown({ ... }))` for every route of a context, or a route's own
 * `{ onRequest: slowDown({ ... }) }`. `request.slowDown` holds `limit`, `used`, `remaining`, `resetTime` and
 * `delay`. No RateLimit headers are sent. A client that leaves while delayed is dropped: the reply is hijacked
 * and the handler never runs. Past `maxPerKey` (10) or `maxWaiting` (1000) delayed requests waiting at once, one
 * more is answered 429 and the handler never runs.
 */
export function slowDown(options: FastifySlowDownOptions = {}): SlowDownHook {
  const engine = new SlowDownEngine<FastifyRequest, [FastifyRequest, FastifyReply]>(options, binding)

  const hook: onRequestHookHandler = function slowDownHook(request, reply, done) {
    const args: [FastifyRequest, FastifyReply] = [request, reply]
    const go = (decided: SlowDownDecision<FastifyRequest> | undefined) => {
      if (decided === undefined) {
        done()
        return
      }
      request.slowDown = decided.info
      if (decided.gone) {
        // The client left before it was counted: nothing is sent, and no later hook nor the handler runs.
        reply.hijack()
        done()
        return
      }
      const answer = (refusal: SlowDownRefusal) => {
        reply
          .code(refusal.statusCode)
          .headers(refusal.headers)
          .type(refusal.contentType)
          .send(refusal.payload)
        // After a reply was sent, Fastify runs nothing more for the request.
        done()
      }
      if (decided.refusal !== undefined) {
        answer(decided.refusal)
        return
      }
      engine.proceed(
        decided,
        args,
        reply.raw,
        // Refused at the end of its delay (a stalled connection), or on to the handler.
        (late) => (late === undefined ? done() : answer(late)),
        () => {
          // The client is gone: nothing is sent, and no later hook nor the handler runs.
          reply.hijack()
          done()
        },
      )
    }
    try {
      const decided = engine.decide(request, args)
      if (decided instanceof Promise) decided.then(go, (error: Error) => done(error))
      else go(decided)
    } catch (error) {
      done(error as Error)
    }
  }
  return Object.assign(hook, {
    resetKey: (key: string) => engine.resetKey(key),
    close: () => engine.close(),
  })
}
