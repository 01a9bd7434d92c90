/**
 * The concurrency slots of option `concurrency`: the limiter that hands them out, beside the middleware's
 * counters, and how an admitted request holds its slot until the handler's work is done.
 */
import { ConcurrencyLimiter, type ConcurrencyResult } from '../limiter/concurrency.js'
import type { ConcurrencyStore } from '../stores/types.js'
import { invalid } from '../support/errors.js'
import type { Defer, TrackedResponse } from './binding.js'
import type { HttpConfig } from './config.js'
import type { ConcurrencyOptions } from './options.js'

/**
 * The limiter of in-flight slots for `config.concurrency`, stored beside the middleware's counters: each route
 * limiter and namespace has its own (with a `rules` function, one set per middleware under its prefix, group and
 * scope). `namespace`: the counters' namespace.
 */
export function slotLimiter<Req>(config: HttpConfig<Req>, namespace: string): ConcurrencyLimiter {
  const { concurrency, limiter } = config
  const { onError } = limiter
  return new ConcurrencyLimiter({
    limit: concurrency!.limit,
    lease: concurrency!.lease,
    renew: concurrency!.renew,
    store: limiter.store as unknown as ConcurrencyStore,
    prefix: `${namespace}cc`,
    timeout: limiter.timeout,
    onStoreError: limiter.onStoreError,
    onError:
      onError && ((error, context) => onError(error, { operation: context.operation, key: context.key })),
  })
}

/**
 * When an admitted request's in-flight slot is given back: once the handler's work is done, never merely
 * because the client left (a concurrency limit bounds server work). The response finishing proves the
 * handler ended it; a closed connection frees the slot only once the handler ended the response too, or at
 * once with `releaseOnClose` (SSE, long polls). What the adapter knows of its framework comes in through
 * `ended` and `done`; a slot whose handler never ends is freed by its lease.
 */
export class SlotHold {
  readonly #slot: ConcurrencyResult
  readonly #releaseOnClose: boolean
  readonly #defer: Defer | undefined
  #released = false
  #ended = false
  #closed = false

  constructor(slot: ConcurrencyResult, releaseOnClose: boolean, defer: Defer | undefined) {
    this.#slot = slot
    this.#releaseOnClose = releaseOnClose
    this.#defer = defer
  }

  release(): void {
    if (this.#released) return
    this.#released = true
    const work = this.#slot.release()
    this.#defer?.(work)
  }

  /** The connection closed (after the response finished, or with the client gone before). */
  closed(): void {
    this.#closed = true
    if (this.#ended || this.#releaseOnClose) this.release()
  }

  /**
   * The handler ended the response (Node's `end()`, Fastify's reply sent): the slot is free once the response
   * finishes or the connection closes, at once when it closed already.
   */
  ended(): void {
    this.#ended = true
    if (this.#closed) this.release()
  }

  /** The handler's work is done (Koa: `await next()` returned): free now, unless it is held until the close. */
  done(): void {
    if (!this.#releaseOnClose) this.release()
  }
}

type Endable = TrackedResponse & { end?: (...args: unknown[]) => unknown }

/**
 * Holds `slot` on `response` until the response finishes, or, when the connection closes first, until the
 * handler ends the response: on a Node response, its `end()` (wrapped on that response once the client has left).
 */
export function holdSlot(
  response: TrackedResponse,
  slot: ConcurrencyResult,
  releaseOnClose: boolean,
  defer: Defer | undefined,
): SlotHold {
  const hold = new SlotHold(slot, releaseOnClose, defer)
  if (response.writableFinished) {
    hold.release()
    return hold
  }
  const onClose = () => {
    if (response.writableEnded === true) hold.ended()
    else if (!releaseOnClose) {
      const endable = response as Endable
      const end = endable.end
      if (typeof end === 'function') {
        endable.end = function endAfterClose(this: unknown, ...args: unknown[]) {
          try {
            return end.apply(this, args)
          } finally {
            hold.ended()
          }
        }
      }
    }
    hold.closed()
  }
  response.once('finish', () => hold.release())
  if (response.destroyed === true) onClose()
  else response.once('close', onClose)
  return hold
}

/** The `concurrency` option of an adapter whose work always gives its slot back (an operation, a procedure call). */
export type SettledConcurrency = Omit<ConcurrencyOptions, 'releaseOnClose'>

/**
 * The engine's `concurrency` for an adapter whose every call ends by giving its slot back (GraphQL's operations,
 * tRPC's procedure calls): as given, renewed by default (`renew`: a call longer than the lease keeps its slot);
 * none for `false`; `byDefault` when none is given and the store has leases (none given: the engine's MemoryStore
 * has), none otherwise. `releaseOnClose` is refused by name: `held` says when the slot is given back instead.
 */
export function settledConcurrency(
  concurrency: SettledConcurrency | false | undefined,
  store: unknown,
  byDefault: SettledConcurrency,
  held: string,
): ConcurrencyOptions | undefined {
  if (concurrency === false) return undefined
  if (concurrency === undefined) {
    const leases =
      store === undefined || typeof (store as { acquire?: unknown } | null)?.acquire === 'function'
    return leases ? { renew: true, ...byDefault } : undefined
  }
  if (typeof concurrency === 'object' && concurrency !== null && 'releaseOnClose' in concurrency)
    throw invalid(
      'ERR_RATEWINDOW_INVALID_OPTION',
      'concurrency.releaseOnClose',
      (concurrency as ConcurrencyOptions).releaseOnClose,
      `nothing: ${held}`,
    )
  // Core's engine checks the rest.
  return typeof concurrency === 'object' && concurrency !== null
    ? { renew: true, ...concurrency }
    : (concurrency as ConcurrencyOptions)
}
