/**
 * What an operator does to one key of a limiter while the service runs (docs/operating-limits.md):
 * overrides (`set`, `get`, `delete`, `list`), manual blocks, units given or taken, and `inspect`. Every call goes
 * to the limiter's store through its gateway (bounded by `timeout`, rejecting with the store's error), and every
 * change is told to `observer.onOverride`.
 */
import {
  type LimitOverride,
  type ManualBlock,
  type OverrideChange,
  type OverrideRecord,
  overrideKey,
  parseLimitOverride,
  parseReason,
} from '../algorithms/override.js'
import type { RecordedPlans } from '../algorithms/plans.js'
import type { Rule } from '../algorithms/types.js'
import type { StoreGateway } from '../gateway/store-gateway.js'
import { type RequestBase, storeRequest } from '../gateway/store-request.js'
import type { OverrideAction, OverrideEvent } from '../observe.js'
import type { Awaitable, Store, StoreRequest } from '../stores/types.js'
import { type Duration, parseTimerDuration } from '../support/duration.js'
import { RateLimitError, requireObject } from '../support/errors.js'
import { namesOf, rejectUnknownOptions } from '../support/option-names.js'
import { keyArgument, optionalText, wellFormedKey, wholeNumber } from '../support/validators.js'
import { type Inspection, inspectionOf, type Usage, usageOf } from './inspection.js'
import { type StoredLimiter, type TopKeys, type TopOptions, topOptions, topStored } from './top.js'

/** Who made a change (`overrides.delete`, `unblock`; also in the options of `set` and `block`). */
export interface OperatorOptions {
  /**
   * Who made the change (an operator, a tool), passed as it is into the `onOverride` event (`event.actor`); kept
   * nowhere else. At most 256 characters.
   */
  actor?: string
}

/** Options of `overrides.set`. */
export interface OverrideSetOptions extends OperatorOptions {
  /** The override ends this long after it was set, on the store's clock (or at its `until`, if earlier). */
  ttl?: Duration
}

/** Options of `block`. */
export interface BlockOptions extends OperatorOptions {
  /** How long the key stays blocked, from now on the store's clock. At most '24d'. */
  for: Duration
  /** Why: for observers and `inspect`, never sent to the client. At most 256 characters. */
  reason?: string
}

/** Options of `overrides.list`. */
export interface OverrideListOptions {
  /** The `cursor` of the previous page. @default the first page */
  cursor?: string
  /** About how many records per page (a hint: a page may hold fewer, or none, before the scan ends). @default 100 */
  count?: number
}

/** A page of `overrides.list`. */
export interface OverrideList {
  /** The keys with an override or a manual block, as the store keeps them. */
  records: OverrideRecord[]
  /** Pass it to the next `list` call; undefined once every record was listed. */
  cursor: string | undefined
}

/** What the operator needs of its limiter. */
interface OperatorTarget {
  readonly name: string
  /** The limiter's namespace: where its counters live. */
  readonly namespace: string
  reset(key: string): Promise<void>
  readonly rules: readonly Rule[]
  /** The override scope (`overrides: true`), else undefined. */
  readonly scope: string | undefined
  readonly gateway: StoreGateway
  /** A store request for `key` and `cost`, validated as `limit` does (with the override scope when on). */
  request(key: string, cost: number, capped?: boolean): StoreRequest
  /** Forgets a cached denial of `key` in this process (an unblock, a raised limit take effect at once). */
  forget(key: string): void
  onOverride: ((event: OverrideEvent) => void) | undefined
}

/** What the limiter hands its operator besides itself and its gateway. */
export interface OperatorHooks {
  forget(key: string): void
  /** The limiter's `reset`: every rule set of it, shadow rules included. */
  reset(key: string): Promise<void>
  onOverride: ((event: OverrideEvent) => void) | undefined
}

const SET_OPTIONS = namesOf<OverrideSetOptions>({ ttl: true, actor: true })
const BLOCK_OPTIONS = namesOf<BlockOptions>({ for: true, reason: true, actor: true })
const OPERATOR_OPTIONS = namesOf<OperatorOptions>({ actor: true })
const MAX_ACTOR = 256
const LIST_OPTIONS = namesOf<OverrideListOptions>({ cursor: true, count: true })

/**
 * Operating one limiter's keys live (docs/operating-limits.md): overrides and manual blocks (with the limiter
 * option `overrides: true`), `give` and `take`, `inspect` and `top`. `limiter.operator` (and `operator` on every
 * middleware).
 * @example await limiter.operator.set('customer:42', { limit: 1000 }, { ttl: '7d' })
 */
export class LimiterOperator {
  /**
   * The limiter's override scope (`overrides: true`), else undefined: where its records live in the store, and
   * what its requests read. Tools that scan the store match it (`decodeNamespace`, `inspectStored`).
   */
  readonly scope: string | undefined
  /**
   * The limiter's plans (option `plans`), as tools that read the store pass them (`inspectStored`, `topStored`): a
   * key is read with the plan its store recorded, that plan's limits as the code gives them. Undefined without plans.
   */
  readonly plans: RecordedPlans | undefined
  readonly #target: OperatorTarget

  /** @internal Made by the limiter. */
  constructor(
    limiter: RequestBase & { readonly name: string },
    gateway: StoreGateway,
    scope: string | undefined,
    hooks: OperatorHooks,
  ) {
    this.scope = scope
    this.plans = limiter.planSet?.recorded
    this.#target = {
      name: limiter.name,
      namespace: limiter.namespace,
      rules: limiter.rules,
      scope,
      gateway,
      request: (key, cost, capped) => storeRequest(limiter, scope, key, cost, capped),
      ...hooks,
    }
  }

  /**
   * Sets the override of `key` (replacing any), seen by every process sharing the store at its next decision
   * (SyncedStore: at its next sync). Validated against the limiter's rules.
   */
  async set(key: string, override: LimitOverride, options: OverrideSetOptions = {}): Promise<void> {
    const target = this.#target
    const scope = requireScope(target, 'overrides.set')
    keyArgument(key)
    overrideKey(key)
    const limits = parseLimitOverride(override, target.rules)
    requireObject(options, 'options', "{ ttl: '7d' }")
    rejectUnknownOptions(options, SET_OPTIONS, 'overrides.set')
    const actor = parseActor(options.actor)
    const change: OverrideChange = { limits }
    if (options.ttl !== undefined) change.ttlMs = parseTimerDuration(options.ttl, 'ttl')
    const record = await update(target, scope, key, change, 'overrides.set')
    target.forget(key)
    tell(target, { key, action: 'set', override: limits, record }, actor)
  }

  /** Whether the limiter has `overrides: true` (else `set`, `get`, `delete`, `list`, `block`, `unblock` reject). */
  get enabled(): boolean {
    return this.scope !== undefined
  }

  /** The limiter's `name`: what its events and an admin endpoint call it. */
  get limiter(): string {
    return this.#target.name
  }

  /** The limiter's rules, as coded (an override changes a key's limits, never these). */
  get rules(): readonly Rule[] {
    return this.#target.rules
  }

  /**
   * `reset`: forgets the counters of `key` (the limiter's `reset`), so that a middleware's handle resets as its
   * limiter does. An override and a block stay: `delete` and `unblock` end them.
   */
  reset(key: string): Promise<void> {
    return this.#target.reset(key)
  }

  /** The override in force for `key`, or undefined. */
  async get(key: string): Promise<LimitOverride | undefined> {
    const record = await read(this.#target, key, 'overrides.get')
    return record?.limits
  }

  /** The record of `key` as the store keeps it (its override and its manual block), or undefined when it has none. */
  record(key: string): Promise<OverrideRecord | undefined> {
    return read(this.#target, key, 'overrides.record')
  }

  /** Removes the override of `key` (a manual block stays). */
  async delete(key: string, options: OperatorOptions = {}): Promise<void> {
    await this.#remove(key, options, { limits: null }, 'overrides.delete', 'delete')
  }

  /**
   * A page of the keys with an override or a manual block. May scan the store (RedisStore: SCAN over every
   * master): for an operator's screen, not for requests.
   */
  async list(options: OverrideListOptions = {}): Promise<OverrideList> {
    const target = this.#target
    const scope = requireScope(target, 'overrides.list')
    requireObject(options, 'options', '{ count: 100 }')
    rejectUnknownOptions(options, LIST_OPTIONS, 'overrides.list')
    const { cursor, count = 100 } = options
    if (cursor !== undefined && typeof cursor !== 'string')
      throw new RateLimitError(
        'ERR_RATEWINDOW_INVALID_OPTION',
        '`cursor` must be the string a previous page returned.',
        { option: 'cursor' },
      )
    wholeNumber(count, 'count', { min: 1 })
    const store = storeFor(target, 'listOverrides', 'overrides.list')
    const page = await target.gateway.operate('overrides.list', () =>
      store.listOverrides!(scope, cursor === undefined ? { count } : { cursor, count }),
    )
    return { records: page.records, cursor: page.cursor }
  }

  /** `block`: refuses every request of `key` for `options.for`, whatever its counters say. */
  async block(key: string, options: BlockOptions): Promise<ManualBlock> {
    const target = this.#target
    const scope = requireScope(target, 'block')
    keyArgument(key)
    overrideKey(key)
    requireObject(options, 'options', "{ for: '1h', reason: 'abuse' }")
    rejectUnknownOptions(options, BLOCK_OPTIONS, 'block')
    const forMs = parseTimerDuration(options.for, 'for')
    const reason = parseReason(options.reason)
    const actor = parseActor(options.actor)
    const change: OverrideChange = { block: reason === undefined ? { forMs } : { forMs, reason } }
    const record = await update(target, scope, key, change, 'block')
    const placed = record?.block ?? { until: 0 }
    tell(target, { key, action: 'block', block: placed, record }, actor)
    return placed
  }

  /** `unblock`: ends the manual block of `key` (an override stays). */
  async unblock(key: string, options: OperatorOptions = {}): Promise<void> {
    await this.#remove(key, options, { block: null }, 'unblock', 'unblock')
  }

  /** `overrides.delete` and `unblock`: one part of the record removed, this process's cached denial forgotten. */
  async #remove(
    key: string,
    options: OperatorOptions,
    change: OverrideChange,
    method: string,
    action: OverrideAction,
  ): Promise<void> {
    const target = this.#target
    const scope = requireScope(target, method)
    keyArgument(key)
    const actor = operatorOptions(options, method)
    const record = await update(target, scope, key, change, method)
    target.forget(key)
    tell(target, { key, action, record }, actor)
  }

  /** `give`: gives `units` back to every rule of `key` now, as far as each holds them. */
  async give(key: string, units: number): Promise<void> {
    const target = this.#target
    wholeNumber(units, 'units', { min: 1, code: 'ERR_RATEWINDOW_INVALID_COST' })
    const request = target.request(key, units, false)
    const store = storeFor(target, 'give', 'give')
    await target.gateway.operate('give', () => store.give!(request))
    target.forget(key)
    tell(target, { key, action: 'give', units })
  }

  /**
   * `take`: charges up to `units` of `key` in every rule now, as far as they admit (never past a limit, unlike a
   * settle: `maxDebt: 0`); resolves the units charged.
   */
  async take(key: string, units: number): Promise<number> {
    const target = this.#target
    wholeNumber(units, 'units', { min: 1, code: 'ERR_RATEWINDOW_INVALID_COST' })
    const request: StoreRequest = { ...target.request(key, units, false), maxDebt: 0 }
    const store = storeFor(target, 'charge', 'take')
    const { charged } = await target.gateway.operate('take', () => store.charge!(request))
    tell(target, { key, action: 'take', units: charged })
    return charged
  }

  /**
   * `top`: the limiter's keys nearest their limit (manual blocks first), found by a scan of the store of at most
   * `scan` keys (RedisStore: SCAN on each master, every client) and read by peeks: for an operator's screen, never
   * for requests. A key shows raw where its override record holds it, else as the store holds it (`topStored`).
   * @example const { keys } = await limiter.operator.top({ count: 10, scan: 10_000 })
   */
  top(options: TopOptions = {}): Promise<TopKeys> {
    const target = this.#target
    requireObject(options, 'options', '{ count: 10, scan: 10000 }')
    topOptions(options, 'overrides.top')
    const store = storeFor(target, 'scanStored', 'overrides.top')
    storeFor(target, 'peekStored', 'overrides.top')
    const self: StoredLimiter = { name: target.name, rules: target.rules }
    if (target.scope !== undefined) self.overrides = target.scope
    if (this.plans !== undefined) self.plans = this.plans
    const operate = <T>(run: () => Awaitable<T>) => target.gateway.operate('overrides.top', run)
    const scanned = {
      scanStored: (page: { cursor?: string | undefined; count: number }) =>
        operate(() => store.scanStored!(page)),
      peekStored: (request: StoreRequest, hash: string) => operate(() => store.peekStored!(request, hash)),
    }
    return topStored(scanned, {
      ...options,
      limiterOf: (namespace) => (namespace === target.namespace ? self : undefined),
    })
  }

  /** Whether `top` can read this limiter's store (one with `scanStored` and `peekStored`: MemoryStore, RedisStore). */
  get ranks(): boolean {
    const store = this.#target.gateway.store
    return typeof store.scanStored === 'function' && typeof store.peekStored === 'function'
  }

  /**
   * Where `key` stands against each rule, for a billing page (`RateLimiter.usage`): the figures of `inspect`, nothing
   * of the operator's. Reachable from every adapter's handle (`operator()`).
   */
  async usage(key: string): Promise<Usage> {
    return usageOf(await this.inspect(key))
  }

  /** `inspect`: where `key` stands, read in one store call (a peek), changing nothing. */
  async inspect(key: string): Promise<Inspection> {
    const target = this.#target
    const request = target.request(key, 1)
    // One store call: the peek reads the override record and decides with it.
    const decision = await target.gateway.operate('inspect', (store) => store.peek(request))
    return inspectionOf(key, request, decision)
  }
}

function requireScope(target: OperatorTarget, method: string): string {
  if (target.scope !== undefined) return target.scope
  throw new RateLimitError(
    'ERR_RATEWINDOW_OVERRIDES_OFF',
    `\`${method}\` needs the limiter option \`overrides: true\` (limiter ${target.name}): without it, decisions read no override or block, and pay nothing for them. Set \`overrides: true\` where the limiter (or middleware) is made.`,
    { option: 'overrides' },
  )
}

/** The store, when it has `method`; else a coded error naming the store. */
function storeFor(target: OperatorTarget, method: keyof Store, call: string): Store {
  const store = target.gateway.store
  if (typeof store[method] === 'function') return store
  throw new RateLimitError(
    'ERR_RATEWINDOW_STORE',
    `\`${call}\` needs a store with \`${method}\`; this limiter's store (${store.constructor?.name ?? typeof store}) has none, so nothing was changed.`,
    { option: 'store' },
  )
}

function update(
  target: OperatorTarget,
  scope: string,
  key: string,
  change: OverrideChange,
  call: string,
): Promise<OverrideRecord | undefined> {
  const store = storeFor(target, 'updateOverride', call)
  return target.gateway.operate(call, () => store.updateOverride!(scope, wellFormedKey(key), change))
}

async function read(target: OperatorTarget, key: string, call: string): Promise<OverrideRecord | undefined> {
  const scope = requireScope(target, call)
  keyArgument(key)
  const store = storeFor(target, 'readOverride', call)
  return target.gateway.operate(call, () => store.readOverride!(scope, wellFormedKey(key)))
}

/** The `actor` of `delete` and `unblock`, their only option. */
function operatorOptions(options: OperatorOptions, method: string): string | undefined {
  requireObject(options, 'options', "{ actor: 'support:ana' }")
  rejectUnknownOptions(options, OPERATOR_OPTIONS, method)
  return parseActor(options.actor)
}

function parseActor(value: unknown): string | undefined {
  return optionalText(value, 'actor', MAX_ACTOR)
}

function tell(
  target: OperatorTarget,
  event: Omit<OverrideEvent, 'limiter' | 'actor'> & { action: OverrideAction },
  actor?: string,
): void {
  if (target.onOverride === undefined) return
  const told: OverrideEvent = { limiter: target.name, ...event }
  if (actor !== undefined) told.actor = actor
  target.onOverride(told)
}

/** @deprecated Renamed `LimiterOperator` (it operates more than overrides); this name stays until 1.0. */
export const LimiterOverrides = LimiterOperator
/** @deprecated Renamed `LimiterOperator`; this name stays until 1.0. */
export type LimiterOverrides = LimiterOperator
