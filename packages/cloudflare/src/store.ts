/** `DurableObjectStore`: the store an application passes its limiters, routing each key to one object. */
import {
  type CallBound,
  type ConcurrencyStore,
  type Decision,
  type LeaseDecision,
  type LeaseRequest,
  type OverrideChange,
  type OverridePage,
  type OverrideRecord,
  RateLimitError,
  type RefundRequest,
  type Store,
  type StoreRequest,
  type StoreTarget,
} from '@ratewindow/core'
import {
  encodeStoreRequest,
  type RemoteAnswer,
  type RemoteCall,
  remoteDecision,
  remoteShardOf,
} from '@ratewindow/core/remote'
import {
  fnOption,
  invalid,
  namesOf,
  rejectUnknownOptions,
  requireObject,
  wholeNumber,
} from '@ratewindow/core/support'
import type { DurableObjectNamespaceLike } from './like.js'
import { type ObjectCallBound, ObjectQueues } from './object-queue.js'

export interface DurableObjectStoreOptions {
  /**
   * The binding of `RateLimiterObject` (`env.RATE_LIMITER`), or a function returning it, read at each call (for
   * a store made before the binding is at hand).
   */
  namespace: DurableObjectNamespaceLike | (() => DurableObjectNamespaceLike)
  /**
   * How many objects the keys are spread over (by a hash of the limiter prefix and key): each object decides
   * its keys one at a time, so more objects carry more traffic. Changing it moves keys: their counts restart.
   * A whole number from 1 to 1024. @default 16
   */
  objects?: number
  /** Names the objects (`<name>:<index>`): stores with other names never share state. @default 'ratewindow' */
  name?: string
  /**
   * For tests only: the time each call carries, used by the object instead of its own clock, so that a test
   * can drive time (`clock: testClock.read`). Leave it unset in production: the object's clock decides.
   */
  clock?: () => number
}

const DURABLE_OBJECT_STORE_OPTIONS = namesOf<DurableObjectStoreOptions>({
  namespace: true,
  objects: true,
  name: true,
  clock: true,
})
/** `DurableObjectStoreOptions`' defaults, in one place (the `@default` tags above say the same). */
export const DURABLE_OBJECT_STORE_DEFAULTS = {
  objects: 16,
  name: 'ratewindow',
} as const satisfies Partial<DurableObjectStoreOptions>

/**
 * A store on Durable Objects (Cloudflare Workers): one exact limit for every isolate and location. Each
 * client key is routed to one of `objects` objects, which decides it atomically with core's algorithms
 * (all five, and quotas on the calendar, whose periods the object computes with its own `Intl`), penalties, settle
 * (charge), refunds, peek, reset, concurrency leases, and overrides and manual
 * blocks (`overrides: true`, kept in the same object as the key's counters and read by the call that decides).
 * Calls made in the same turn of the event loop for one object travel together, in requests of at most 100
 * calls sent one after another (object-queue.ts), each call's wait bounded from its request's sending
 * (`boundsWait`).
 * @example new DurableObjectStore({ namespace: env.RATE_LIMITER })
 */
export class DurableObjectStore implements Store, ConcurrencyStore {
  readonly penalties = true
  readonly overrides = true
  /** Quota rules travel with their calendar (`EncodedRule`): the object decides their periods on its clock. */
  readonly quotas = true
  readonly plans = true
  /** A turn's calls go to each object 100 at a time: each one's wait is bounded from its request's sending. */
  readonly boundsWait = true
  readonly #namespace: () => DurableObjectNamespaceLike
  readonly #objects: number
  readonly #name: string
  readonly #clock: (() => number) | undefined
  /** Object ids by index, per namespace (a function may return another binding object per request). */
  readonly #ids = new WeakMap<DurableObjectNamespaceLike, unknown[]>()
  readonly #queues = new ObjectQueues(
    (index, calls) => this.#request(index, calls),
    (index) => `${this.#name}:${index}`,
  )

  constructor(options: DurableObjectStoreOptions) {
    requireObject(options, 'options', '{ namespace: env.RATE_LIMITER }')
    rejectUnknownOptions(options, DURABLE_OBJECT_STORE_OPTIONS, 'DurableObjectStore')
    const {
      namespace,
      objects = DURABLE_OBJECT_STORE_DEFAULTS.objects,
      name = DURABLE_OBJECT_STORE_DEFAULTS.name,
      clock,
    } = options
    if (typeof namespace === 'function') this.#namespace = namespace
    else if (isNamespace(namespace)) this.#namespace = () => namespace
    else
      throw invalid(
        'ERR_RATEWINDOW_INVALID_OPTION',
        'namespace',
        namespace,
        'the Durable Object namespace binding of RateLimiterObject, such as env.RATE_LIMITER',
      )
    wholeNumber(objects, 'objects', { min: 1, allowed: 'a whole number from 1 to 1024' })
    if (objects > 1024)
      throw invalid('ERR_RATEWINDOW_INVALID_OPTION', 'objects', objects, 'a whole number from 1 to 1024')
    if (typeof name !== 'string' || name.length === 0 || name.length > 64)
      throw invalid(
        'ERR_RATEWINDOW_INVALID_OPTION',
        'name',
        name,
        'a non-empty string of at most 64 characters',
      )
    if (clock !== undefined) fnOption(clock, 'clock', 'a function returning epoch ms')
    this.#objects = objects
    this.#name = name
    this.#clock = clock
  }

  async consume(request: StoreRequest, within?: CallBound): Promise<Decision> {
    const decode = (answer: RemoteAnswer) => this.#decision(request, answer)
    return decode(await this.#send(request, this.#stateCall('consume', request), within, decode))
  }

  async peek(request: StoreRequest, within?: CallBound): Promise<Decision> {
    const decode = (answer: RemoteAnswer) => this.#decision(request, answer)
    return decode(await this.#send(request, this.#stateCall('peek', request), within, decode))
  }

  // A give, a refund, a charge and a release take the bound of their wait only: their late answers go nowhere.
  async give(request: StoreRequest, within?: CallBound): Promise<void> {
    await this.#send(request, this.#stateCall('give', request), waitOf(within))
  }

  async refund(request: RefundRequest, within?: CallBound): Promise<void> {
    await this.#send(request, this.#stateCall('refund', request), waitOf(within))
  }

  async charge(request: StoreRequest, within?: CallBound): Promise<{ charged: number }> {
    return charged(await this.#send(request, this.#stateCall('charge', request), waitOf(within)))
  }

  async reset(target: StoreTarget): Promise<void> {
    await this.#send(target, { op: 'reset', request: encodeStoreRequest(target) })
  }

  /** Changes the record of `key` in the object that decides for it (`overrides: true`). */
  async updateOverride(
    scope: string,
    key: string,
    change: OverrideChange,
  ): Promise<OverrideRecord | undefined> {
    return this.#record(
      await this.#send({ prefix: scope, key }, this.#timed({ op: 'override', scope, key, change })),
    )
  }

  async readOverride(scope: string, key: string): Promise<OverrideRecord | undefined> {
    return this.#record(
      await this.#send({ prefix: scope, key }, this.#timed({ op: 'read-override', scope, key })),
    )
  }

  /**
   * A page of the records under `scope`, from one object: the objects one after another, in the order of their
   * index, each in key order, one fetch per page (so that each page is one round trip, within the limiter's
   * `timeout`). A page may hold fewer records than `count`, or none, before the end; the cursor says the object and
   * the key to go on from (`<index>:<client id>`). A full listing asks every object at least once.
   */
  async listOverrides(
    scope: string,
    page: { cursor?: string | undefined; count: number },
  ): Promise<OverridePage> {
    const { index, after } = parseCursor(page.cursor)
    if (index >= this.#objects) return { records: [], cursor: undefined }
    const call: RemoteCall = { op: 'list-overrides', scope, count: page.count }
    if (after !== undefined) call.after = after
    const answer = await this.#sendTo(index, this.#timed(call))
    if (!('records' in answer)) throw unexpected(answer)
    const cursor =
      answer.after !== null
        ? `${index}:${answer.after}`
        : index + 1 < this.#objects
          ? `${index + 1}`
          : undefined
    return { records: answer.records, cursor }
  }

  async acquire(request: LeaseRequest, within?: CallBound<LeaseDecision>): Promise<LeaseDecision> {
    const { prefix, key, id, limit, leaseMs } = request
    const call = this.#timed({ op: 'acquire', prefix, key, id, limit, leaseMs } as const)
    return lease(await this.#send(request, call, within, lease))
  }

  async release(request: Omit<LeaseRequest, 'limit'>, within?: CallBound): Promise<void> {
    const call: RemoteCall = { op: 'release', prefix: request.prefix, key: request.key, id: request.id }
    await this.#send(request, call, waitOf(within))
  }

  /** The failure domain of a key: the object it lives in (the limiter keeps one circuit breaker per object). */
  failureDomainOf(target: { prefix: string; key: string }): number {
    return this.#indexOf(target)
  }

  /** @deprecated `failureDomainOf`; this name stays until 1.0. */
  scopeOf(target: { prefix: string; key: string }): number {
    return this.failureDomainOf(target)
  }

  #stateCall(op: 'consume' | 'peek' | 'refund' | 'charge' | 'give', request: StoreRequest): RemoteCall {
    return this.#timed({ op, request: encodeStoreRequest(request) })
  }

  /** The call with the store's `clock` reading, when one is set (tests). */
  #timed<T extends RemoteCall>(call: T): T {
    if (this.#clock !== undefined && call.op !== 'release') (call as { now?: number }).now = this.#clock()
    return call
  }

  #decision(request: StoreRequest, answer: RemoteAnswer): Decision {
    if (!('decision' in answer)) throw unexpected(answer)
    return remoteDecision(request, answer.decision)
  }

  #record(answer: RemoteAnswer): OverrideRecord | undefined {
    if (!('record' in answer)) throw unexpected(answer)
    return answer.record ?? undefined
  }

  /**
   * Which of the objects holds the prefix and key (core's shard hash). NOTE: a limiter with `overrides: true`
   * routes by its override scope in place of its namespace, so that the object deciding for a key holds its
   * override record whatever the coded limits (the namespace holds them; the scope does not): a deploy that changes
   * a limit keeps the record in reach.
   */
  #indexOf(target: { prefix: string; key: string; overrides?: string | undefined }): number {
    const { overrides, key } = target
    return remoteShardOf(overrides === undefined ? target : { prefix: overrides, key }, this.#objects)
  }

  /**
   * Queues a call for the object of its key. With a bound (`within`: a grouped call of the limiter), its wait is
   * bounded from its request's sending, and an answer that arrives after it timed out goes to `within.late`, read
   * by `decode` as the call's own answer is.
   */
  #send<T>(
    target: { prefix: string; key: string; overrides?: string | undefined },
    call: RemoteCall,
    within?: CallBound<T>,
    decode?: (answer: RemoteAnswer) => T,
  ): Promise<RemoteAnswer> {
    return this.#sendTo(this.#indexOf(target), call, within, decode)
  }

  /** Queues a call for object `index` (object-queue.ts); a call the object refused rejects. */
  #sendTo<T>(
    index: number,
    call: RemoteCall,
    within?: CallBound<T>,
    decode?: (answer: RemoteAnswer) => T,
  ): Promise<RemoteAnswer> {
    let bound: ObjectCallBound | undefined
    if (within !== undefined) {
      const late = within.late
      bound = { timeoutMs: within.timeoutMs, call: within.call }
      if (late !== undefined && decode !== undefined) {
        bound.late = (answer) => {
          try {
            late.arrive(decode(this.#checked(index, answer)))
          } catch (error) {
            late.lose?.(error)
          }
        }
        bound.lose = (error) => late.lose?.(error)
      }
    }
    return this.#queues.submit(index, call, bound).then((answer) => this.#checked(index, answer))
  }

  /** The answer, unless the object refused the call. */
  #checked(index: number, answer: RemoteAnswer): RemoteAnswer {
    if ('error' in answer)
      throw new RateLimitError(
        'ERR_RATEWINDOW_STORE',
        `DurableObjectStore: object ${this.#name}:${index}: ${answer.error}`,
      )
    return answer
  }

  /** One request to object `index` carrying `calls`: their answers, in order; rejects when the request fails. */
  async #request(index: number, calls: RemoteCall[]): Promise<RemoteAnswer[]> {
    try {
      const namespace = this.#namespace()
      let ids = this.#ids.get(namespace)
      if (ids === undefined) {
        ids = []
        this.#ids.set(namespace, ids)
      }
      ids[index] ??= namespace.idFromName(`${this.#name}:${index}`)
      const response = await namespace
        .get(ids[index])
        .fetch('https://ratewindow.invalid/', { method: 'POST', body: JSON.stringify(calls) })
      const text = await response.text()
      if (!response.ok) throw new Error(`HTTP ${response.status}: ${text.slice(0, 200)}`)
      const answers = JSON.parse(text) as RemoteAnswer[]
      if (!Array.isArray(answers) || answers.length !== calls.length)
        throw new Error('the object answered a different number of calls')
      return answers
    } catch (error) {
      throw new RateLimitError(
        'ERR_RATEWINDOW_STORE',
        `DurableObjectStore: object ${this.#name}:${index} failed: ${(error as Error)?.message ?? String(error)}`,
        { cause: error },
      )
    }
  }
}

/** The bound of a call's wait alone, without its late answers. */
function waitOf(within: CallBound | undefined): CallBound<never> | undefined {
  return within === undefined ? undefined : { timeoutMs: within.timeoutMs, call: within.call }
}

/** A charge's answer. */
function charged(answer: RemoteAnswer): { charged: number } {
  if (!('charged' in answer)) throw unexpected(answer)
  return { charged: answer.charged }
}

/** An acquire's answer. */
function lease(answer: RemoteAnswer): LeaseDecision {
  if (!('lease' in answer)) throw unexpected(answer)
  return answer.lease
}

function isNamespace(value: unknown): value is DurableObjectNamespaceLike {
  return (
    typeof value === 'object' &&
    value !== null &&
    typeof (value as DurableObjectNamespaceLike).idFromName === 'function' &&
    typeof (value as DurableObjectNamespaceLike).get === 'function'
  )
}

/** `listOverrides`' cursor: the object to go on with, and the client id after which (none: from its start). */
function parseCursor(cursor: string | undefined): { index: number; after: string | undefined } {
  if (cursor === undefined) return { index: 0, after: undefined }
  const colon = cursor.indexOf(':')
  const index = Number(colon === -1 ? cursor : cursor.slice(0, colon))
  if (!Number.isSafeInteger(index) || index < 0)
    throw new RateLimitError(
      'ERR_RATEWINDOW_INVALID_OPTION',
      `\`cursor\` ${JSON.stringify(cursor)} is not one a page of DurableObjectStore returned.`,
      { option: 'cursor' },
    )
  return { index, after: colon === -1 ? undefined : cursor.slice(colon + 1) }
}

function unexpected(answer: RemoteAnswer): RateLimitError {
  return new RateLimitError(
    'ERR_RATEWINDOW_STORE',
    `DurableObjectStore: unexpected answer ${JSON.stringify(answer).slice(0, 200)}`,
  )
}
