/**
 * `GraphQLRateLimiter`: the binding of GraphQL operations on core's HTTP engine (`HttpRateLimiter`), which both
 * plugins share. The engine decides (gate, key, rules, store, failure policy, headers) exactly as it does for the
 * HTTP adapters; this binding estimates the operation's cost first, turns the engine's answer into an admission
 * or a refusal, and settles the admission to the actual cost after execution (core's reserve-then-settle).
 */
import { RateLimitError, type SettleResult } from '@ratewindow/core'
import { type FrameworkBinding, type HttpDecision, HttpRateLimiter } from '@ratewindow/core/adapter'
import { countResultFields, StreamTally } from './actual.js'
import { add, DepthExceeded, estimateCost, IntrospectionExceeded } from './estimate.js'
import {
  type ExecutionOutcome,
  type GraphQLConfig,
  type GraphQLOperation,
  type GraphQLRateLimitOptions,
  resolveGraphQLOptions,
} from './options.js'

/** An operation that may run: its headers follow a settle until they are sent. */
export interface AdmittedOperation<TContext> {
  operation: GraphQLOperation<TContext>
  /** The engine's decision; none when the operation was not limited (`skip`, an allow list, `enabled: false`). */
  decision: HttpDecision | undefined
  /** The RateLimit headers for the response, rewritten in place by a settle. */
  headers: Record<string, string>
}

/** @deprecated `AdmittedOperation` (`Admission` also named an admitted WebSocket upgrade); this name stays until 1.0. */
export type Admission<TContext> = AdmittedOperation<TContext>

/** Why an operation may not run, in GraphQL terms: the plugins throw or return it as a `GraphQLError`. */
export interface Refusal {
  /** `extensions.code`. */
  code:
    | 'RATE_LIMITED'
    | 'FORBIDDEN'
    | 'MAX_DEPTH_EXCEEDED'
    | 'MAX_COST_EXCEEDED'
    | 'MAX_INTROSPECTION_EXCEEDED'
  message: string
  /** The HTTP status, where the transport is HTTP. */
  status: number
  /** The HTTP headers of the refusal (RateLimit fields and `Retry-After`), where the transport is HTTP. */
  headers: Record<string, string>
  /** `extensions.retryAfter`: whole seconds, as `Retry-After`; for `RATE_LIMITED` only. */
  retryAfter?: number
  /** `extensions.cost`: what the operation would have reserved, when known. */
  cost?: number
}

/** The status of a request that can never pass as it is (too deep, too costly): the client must change it. */
const BAD_REQUEST = 400

/** Decides and settles GraphQL operations for one plugin. */
export class GraphQLRateLimiter<TContext> {
  readonly #config: GraphQLConfig<TContext>
  readonly #engine: HttpRateLimiter<GraphQLOperation<TContext>>
  readonly #where: string
  /** What each operation reserved (the `cost` its estimate gave), for a refusal that names it. */
  readonly #reserved = new WeakMap<GraphQLOperation<TContext>, number>()

  constructor(options: GraphQLRateLimitOptions<TContext>, where: string) {
    this.#where = where
    this.#config = resolveGraphQLOptions(options, where, defaultActualCost)
    const { cost } = this.#config
    this.#engine = new HttpRateLimiter(
      {
        ...this.#config.engine,
        cost:
          typeof cost === 'number'
            ? cost
            : async (operation) => {
                const reserved = cost === undefined ? operation.estimate.cost : await cost(operation)
                this.#reserved.set(operation, reserved)
                return reserved
              },
      },
      this.#binding(),
      { where },
    )
  }

  /** Whether admitted operations are settled after they run (`actualCost`). */
  get settles(): boolean {
    return this.#config.actualCost !== false
  }

  /**
   * The depth and introspection guards and the estimate, then the engine's decision: an admission (holding its
   * in-flight slot, with `concurrency`, until `settle` or `release`), or a refusal. Rejects only for a
   * programming error (a `key`, `cost` or `rules` function that throws or returns a bad value).
   */
  async admit(
    parts: Omit<GraphQLOperation<TContext>, 'estimate'>,
  ): Promise<AdmittedOperation<TContext> | Refusal> {
    let operation: GraphQLOperation<TContext>
    try {
      operation = { ...parts, estimate: estimateCost(parts, this.#config.model) }
    } catch (error) {
      if (error instanceof DepthExceeded) return depthRefusal(error)
      if (error instanceof IntrospectionExceeded) return introspectionRefusal(error)
      throw error
    }
    let decision: HttpDecision | undefined
    try {
      decision = await this.#engine.decide(operation)
    } catch (error) {
      if (error instanceof RateLimitError && error.code === 'ERR_RATEWINDOW_COST_EXCEEDS_LIMIT')
        return costRefusal(this.#reserved.get(operation) ?? this.#config.cost)
      throw error
    }
    if (decision === undefined) return { operation, decision, headers: {} }
    if (!decision.result.allowed) return refusalOf(decision, this.#reserved.get(operation))
    const headers = { ...decision.headers }
    this.#engine.followSettle(decision, headers)
    return { operation, decision, headers }
  }

  /**
   * Settles an admitted operation to its actual cost (`actualCost`, by default the fields of the response): the
   * difference is charged in full (owed up to `maxDebt`), or given back; its headers follow. Then its in-flight
   * slot is given back (`release`), settled or not: call it once the operation ran. Never rejects for a store
   * failure (reported to `onError`); undefined when there was nothing to settle.
   */
  async settle(
    admission: AdmittedOperation<TContext>,
    outcome: ExecutionOutcome,
  ): Promise<SettleResult | undefined> {
    try {
      const { actualCost } = this.#config
      const result = admission.decision?.result
      if (actualCost === false || result?.settle === undefined) return undefined
      return await result.settle(await actualCost(outcome, admission.operation))
    } finally {
      this.release(admission)
    }
  }

  /**
   * Gives an admitted operation's in-flight slot back (option `concurrency`) without settling it: for one that
   * is never settled (a subscription, once it subscribed). Once; later calls, and `settle` after it, do nothing to
   * the slot. Never throws (a store failure goes to `onError`, and the release is retried).
   */
  release(admission: AdmittedOperation<TContext>): void {
    // NOTE: a release never rejects, and is idempotent (core's ConcurrencyLimiter).
    void admission.decision?.slot?.release()
  }

  /**
   * Follows a result streamed in parts (`@defer`, `@stream`) as it is sent: each part is counted as it passes,
   * and the operation is settled once, when the stream ends or is cancelled (before its end is passed on). `first`
   * is a part sent apart, before `parts` (Apollo's initial result); without it, the first of `parts` is the first.
   */
  followStream<T>(
    admission: AdmittedOperation<TContext>,
    parts: AsyncIterable<T>,
    first?: T,
  ): AsyncIterable<T> {
    const settles = this.#config.actualCost !== false && admission.decision?.result.settle !== undefined
    if (!settles && admission.decision?.slot === undefined) return parts
    return this.#follow(admission, parts, first)
  }

  async *#follow<T>(
    admission: AdmittedOperation<TContext>,
    parts: AsyncIterable<T>,
    first?: T,
  ): AsyncGenerator<T> {
    const tally = new StreamTally(admission.operation)
    if (first !== undefined) tally.add(first)
    try {
      for await (const part of parts) {
        tally.add(part)
        yield part
      }
    } finally {
      // NOTE: nobody awaits the end of a cancelled stream: a hook that throws is reported, never rejected.
      await this.settle(admission, tally.outcome()).catch((error: unknown) =>
        this.#reportSettleError(error, admission),
      )
    }
  }

  /** Forgets `key` in every counter of this plugin (e.g. after a successful login). Rejects on a store error. */
  resetKey(key: string): Promise<void> {
    return this.#engine.resetKey(key)
  }

  /** Gives up this plugin's counters' namespaces (a server that goes); a store you passed stays yours to close. */
  close(): void {
    this.#engine.close()
  }

  #reportSettleError(error: unknown, admission: AdmittedOperation<TContext>): void {
    const key = admission.decision?.result.key ?? ''
    try {
      const { onError } = this.#config.engine
      if (onError) Promise.resolve(onError(error, { operation: 'settle', key })).catch(() => undefined)
      else console.error(`${this.#where}: settling a streamed operation failed:`, error)
    } catch {
      // onError itself failed: nothing left to tell
    }
  }

  #binding(): FrameworkBinding<GraphQLOperation<TContext>> {
    const { clientIp } = this.#config
    const where = this.#where
    return {
      name: 'GraphQL',
      clientIp: clientIp ?? ((operation) => nodeAddress(operation, where)),
      untrustedForwardedFor: (operation) =>
        operation.headers?.get('x-forwarded-for') == null ? undefined : clientIp === undefined,
      trustProxyHint: `pass \`clientIp\` (the client's address behind your proxies) or \`key\` to ${where}`,
      route: (operation) => operation.operationName,
      // After a settle: the headers of the operation, until the response is sent.
      writeHeaders: (target, headers) => Object.assign(target as Record<string, string>, headers),
    }
  }
}

/** The client address of the Node request in the context (`context.req`), as Yoga on Node gives it. */
function nodeAddress(operation: GraphQLOperation, where: string): string {
  const request = (operation.context as { req?: { socket?: { remoteAddress?: string } } } | undefined)?.req
  const address = request?.socket?.remoteAddress
  if (typeof address === 'string' && address !== '') return address
  throw new RateLimitError(
    'ERR_RATEWINDOW_INVALID_IP',
    `${where} found no client address: the GraphQL context holds no Node request (\`req\`). Pass \`key\` (e.g. the user or API token in the context) or \`clientIp\`.`,
    { option: 'key' },
  )
}

function depthRefusal(error: DepthExceeded): Refusal {
  const depth = Number.isFinite(error.depth) ? `${error.depth} deep` : 'in a cycle of fragments'
  return {
    code: 'MAX_DEPTH_EXCEEDED',
    message: `The operation nests its fields ${depth}; at most ${error.maxDepth} are allowed.`,
    status: BAD_REQUEST,
    headers: {},
  }
}

/**
 * The default `actualCost`: the fields of the response and of its incremental parts, read by the operation. A null
 * `data` means the resolvers ran and an error nulled everything they made: the work was done, the estimate stands.
 */
function defaultActualCost(result: ExecutionOutcome, operation: GraphQLOperation): number {
  if (result.data === null) return add(operation.estimate.cost, result.incrementalCost ?? 0)
  return add(countResultFields(result.data, operation), result.incrementalCost ?? 0)
}

function introspectionRefusal(error: IntrospectionExceeded): Refusal {
  return {
    code: 'MAX_INTROSPECTION_EXCEEDED',
    message: `The operation asks for \`${error.field}\` ${error.count} times (aliases included); at most ${error.max} ${error.max === 1 ? 'is' : 'are'} allowed (\`maxIntrospection\`).`,
    status: BAD_REQUEST,
    headers: {},
  }
}

function costRefusal(cost: unknown): Refusal {
  const known = typeof cost === 'number'
  return {
    code: 'MAX_COST_EXCEEDED',
    message: `The operation costs ${known ? `${cost}, more` : 'more'} than the rate limit admits at once: it could never run. Ask for fewer fields or smaller lists.`,
    status: BAD_REQUEST,
    headers: {},
    ...(known ? { cost } : {}),
  }
}

/** The engine's denial in GraphQL terms: deny-listed (`FORBIDDEN`), or limited (`RATE_LIMITED`, with its wait). */
function refusalOf({ result, statusCode, headers }: HttpDecision, cost: number | undefined): Refusal {
  if (result.source === 'deny-list')
    return { code: 'FORBIDDEN', message: 'Access denied.', status: statusCode, headers: {} }
  const retryAfter = Math.ceil(result.retryAfter / 1000)
  const wait = `retry in ${retryAfter} second${retryAfter === 1 ? '' : 's'}.`
  const message =
    result.source === 'policy'
      ? 'Rate limiting is unavailable; retry later.'
      : result.blocked !== undefined
        ? `Blocked after repeated rate limit violations: ${wait}`
        : `Too many requests: ${wait}`
  return {
    code: 'RATE_LIMITED',
    message,
    status: statusCode,
    headers: { ...headers },
    retryAfter,
    ...(cost === undefined ? {} : { cost }),
  }
}
