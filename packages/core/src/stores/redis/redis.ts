import type { OverrideChange, OverrideRecord } from '../../algorithms/override.js'
import type { Penalty } from '../../algorithms/penalty.js'
import type { Rule } from '../../algorithms/types.js'
import { RateLimitError } from '../../support/errors.js'
import type {
  CallBound,
  Charged,
  ConcurrencyStore,
  Decision,
  LeaseDecision,
  LeaseRequest,
  OverridePage,
  RefundRequest,
  Store,
  StoredKeyPage,
  StoreRequest,
  StoreTarget,
} from '../types.js'
import type { RedisClient, RedisScriptRunner } from './clients/index.js'
import { clusterSlot, nodeFor } from './cluster-slot.js'
import { EvictionWatch } from './eviction.js'
import { DEFAULT_MAX_FLIGHTS, type GroupStats, RedisGroups, type Within } from './groups.js'
import { LEASE_MODE } from './lease-script.js'
import { LoadedScripts } from './loaded-scripts.js'
import { type RedisStoreOptions, resolveRedisStoreOptions } from './options.js'
import {
  listOverrides,
  overrideRecordKey,
  PreparedWithOverrides,
  passed,
  readOverride,
  serverNow,
  updateOverride,
} from './overrides.js'
import { ReadyGate } from './ready-gate.js'
import { decodeDecision } from './reply.js'
import { giveMode, MODE, type Script, scriptFor } from './script.js'
import {
  type DecisionCall,
  LEASE_PREPARED,
  PENALTY_SUFFIX,
  type Prepared,
  prepareRuleSet,
  type ScriptCall,
  sendGroup,
} from './send-group.js'
import { StoredHashes, scanStored } from './stored-keys.js'

/**
 * The groups of each client: every RedisStore on one client connection shares them. Each call resolves
 * to the value its `Prepared` decodes from the reply: a `Decision`, a charge, a `LeaseDecision`.
 */
const GROUPS = new WeakMap<object, RedisGroups<ScriptCall, unknown>>()

/** The groups of `client`, made on first use: its calls grouped per node, its scripts loaded per node. */
function groupsOf(client: RedisClient, runner: RedisScriptRunner): RedisGroups<ScriptCall, unknown> {
  let groups = GROUPS.get(client)
  if (groups === undefined) {
    const together = runner.together?.bind(runner)
    const scripts = new LoadedScripts(runner)
    groups = new RedisGroups((entries) => sendGroup(runner, scripts, entries), {
      // A Cluster client that cannot tell which node serves a slot groups per slot, one flight at a time: a
      // call answered NOSCRIPT is sent again before the next flight to that slot goes (see LoadedScripts).
      maxFlights: scripts.tracked ? DEFAULT_MAX_FLIGHTS : 1,
      // A client that refuses commands past a number in flight (GLIDE) never gets more from us.
      maxCalls: runner.maxInFlight,
      // The calls of a flight to one node (several rule sets, or several slots of a Cluster node) in one write.
      together:
        together &&
        ((call: ScriptCall, send: () => void) => together(runner.cluster ? clusterSlot(call.base) : 0, send)),
    })
    GROUPS.set(client, groups)
  }
  return groups
}

/**
 * Rate limit state in Redis (>= 6.2) or Valkey, standalone or Cluster, through ioredis, iovalkey, node-redis or
 * Valkey GLIDE. One round trip per decision: a single Lua script, run by EVALSHA (the source is sent only when
 * the node answers NOSCRIPT), decides every rule of a request and writes them with their TTLs atomically.
 *
 * Keys are `<prefix><limiter prefix>{<hash of identifier>}:<rule id>`: the hash tag keeps all rules of one
 * client in one Cluster slot, and hashing bounds key length and removes braces from hostile identifiers.
 */
export class RedisStore implements Store, ConcurrencyStore {
  /**
   * The Lua script run for a rule set (it holds only the algorithms those rules use) and its SHA1, e.g. to
   * `SCRIPT LOAD` it ahead or to benchmark it.
   */
  static scriptFor(rules: readonly Rule[], options: { penalty?: boolean } = {}): Script {
    return scriptFor(
      rules.map((rule) => rule.script.code),
      options.penalty === true,
    )
  }

  readonly penalties = true
  readonly reservations = true
  /** Overrides and manual blocks (docs/operating-limits.md): read by the decision script itself. */
  readonly overrides = true
  readonly plans = true
  /** Quota rules: the bounds of their periods are computed here and given to the script (`quotaBounds`). */
  readonly quotas = true
  /** Decisions are queued and grouped per node: each call's wait is bounded from the moment it is sent. */
  readonly boundsWait = true
  readonly #runner: RedisScriptRunner
  readonly #groups: RedisGroups<ScriptCall, unknown>
  readonly #maxWaiting: number
  readonly #prepared = new WeakMap<readonly Rule[], Prepared>()
  /** The hash tags of recent client keys. */
  readonly #hashes = new StoredHashes()
  readonly #preparedWithPenalty = new WeakMap<readonly Rule[], Prepared>()
  /** Rule sets read with their override records: per rule array, per override scope. */
  readonly #withOverrides = new PreparedWithOverrides()
  /** The override scripts (set, read, list), run by EVALSHA then EVAL like the decisions. */
  readonly #operatorScripts: LoadedScripts
  readonly #prefix: string
  readonly #clock: (() => number) | undefined
  readonly #eviction: EvictionWatch
  readonly #ready: ReadyGate | undefined

  constructor(options: RedisStoreOptions) {
    const config = resolveRedisStoreOptions(options)
    const { client, runner, readyTimeoutMs } = config
    this.#ready = readyTimeoutMs === undefined ? undefined : new ReadyGate(runner, readyTimeoutMs)
    this.#runner = runner
    this.#maxWaiting = config.maxWaiting
    this.#groups = groupsOf(client, runner)
    this.#prefix = config.prefix
    this.#clock = config.clock
    this.#eviction = new EvictionWatch(client)
    this.#operatorScripts = new LoadedScripts(runner)
  }

  /** The Redis key holding the override record of `key` under a limiter's override `scope` (same hash tag). */
  recordKeyFor(scope: string, key: string): string {
    return this.#recordKey(scope, this.#hashes.of(key))
  }

  #recordKey(scope: string, hash: string): string {
    return overrideRecordKey(this.#prefix, scope, hash)
  }

  updateOverride(scope: string, key: string, change: OverrideChange): Promise<OverrideRecord | undefined> {
    return updateOverride(this.#operatorScripts, this.recordKeyFor(scope, key), key, change, this.#now())
  }

  readOverride(scope: string, key: string): Promise<OverrideRecord | undefined> {
    return readOverride(this.#operatorScripts, this.recordKeyFor(scope, key), this.#now())
  }

  listOverrides(scope: string, page: { cursor?: string | undefined; count: number }): Promise<OverridePage> {
    return listOverrides(this.#runner, this.#operatorScripts, `${this.#prefix}${scope}`, page, this.#now())
  }

  /** One SCAN step over the store's keys, on each master in turn (`Store.scanStored`). */
  scanStored(page: { cursor?: string | undefined; count: number }): Promise<StoredKeyPage> {
    return scanStored(this.#runner, this.#operatorScripts, this.#prefix, page)
  }

  /** The Redis key holding `rule`'s state for `key` under a limiter `prefix`. */
  keyFor(prefix: string, key: string, rule: Rule): string {
    return `${this.#base(prefix, key)}${rule.id}`
  }

  /** The Redis key holding the penalty state of `key` under a limiter `prefix` (same hash tag as its rules). */
  penaltyKeyFor(prefix: string, key: string): string {
    return `${this.#base(prefix, key)}${PENALTY_SUFFIX}`
  }

  /**
   * The failure domain of a client's keys: on a Cluster client, the master that serves their slot (`host:port`
   * from the client's slot table), `'unknown'` while the client does not know it, or the slot number for a client
   * that never tells (no `nodeOf`: Valkey GLIDE); on a single server, `undefined` (one domain).
   */
  failureDomainOf(target: StoreTarget): string | number | undefined {
    if (!this.#runner.cluster) return undefined
    return nodeFor(this.#runner, clusterSlot(this.#base(target.prefix, target.key)))
  }
  /** @deprecated `failureDomainOf`; this name stays until 1.0. */
  scopeOf(target: StoreTarget): string | number | undefined {
    return this.failureDomainOf(target)
  }

  /**
   * Decides and records. While a call is in flight to the key's node, the decision waits and goes with the others
   * that arrive in the next call (docs/redis.md); `within` (given by the limiter) bounds the wait once sent.
   */
  consume(request: StoreRequest, within?: CallBound): Promise<Decision> {
    if (request.reserve !== undefined) return this.#decide(request, MODE.reserve, request.reserve, within)
    return this.#decide(request, MODE.consume, 0, within)
  }

  peek(request: StoreRequest, within?: CallBound): Promise<Decision> {
    return this.#decide(request, MODE.peek, 0, within)
  }

  /**
   * A peek at the state kept under the hash tag `hash` (`request.key` is not hashed again): for tools that find a
   * key by scanning, knowing only its hash (`inspectStored`, `@ratewindow/cli`). Changes nothing.
   */
  peekStored(request: StoreRequest, hash: string): Promise<Decision> {
    return this.#run(request, MODE.peek, 0, undefined, this.#now(), hash) as Promise<Decision>
  }

  /** How many flights, calls and decisions went to Redis so far on this client, and how many were shed. */
  get groupStats(): Readonly<GroupStats> {
    return this.#groups.stats
  }

  async refund(request: RefundRequest, within?: CallBound): Promise<void> {
    const { notices } = (await this.#run(request, MODE.refund, request.at, within)) as Decision
    // A refund has no decision to carry the notice: fail it, so that the limiter reports it to onError.
    if (notices?.[0] !== undefined) throw notices[0]
  }

  /**
   * `RateLimiter.give`: a refund of units admitted now, on the server's clock (read first when the store has no
   * `clock`); a sliding window log gives back its newest units admitted by then, whatever their times (`giveMode`).
   */
  async give(request: StoreRequest, within?: CallBound): Promise<void> {
    const base = this.#base(request.prefix, request.key)
    const now = this.#clock === undefined ? await serverNow(this.#operatorScripts, base) : this.#now()
    const mode = giveMode(request.rules)
    const { notices } = (await this.#run(request, mode, now, within, now)) as Decision
    if (notices?.[0] !== undefined) throw notices[0]
  }

  /** `Store.charge`: the script's charge mode, with the request's `maxDebt` (-1: each rule's limit). */
  charge(request: StoreRequest, within?: CallBound): Promise<Charged> {
    return this.#run(request, MODE.charge, request.maxDebt ?? -1, within) as Promise<Charged>
  }

  /**
   * Takes an in-flight lease (ConcurrencyLimiter) in one script: a sorted set per key, lease ids scored by their
   * expiry; expired ones are dropped first, so a crashed process's slots come back after the lease time.
   */
  async acquire(request: LeaseRequest, within?: CallBound<LeaseDecision>): Promise<LeaseDecision> {
    // A late lease reaches the limiter as a `LeaseDecision` (what the call decodes to), for its release.
    return this.#lease(
      request.prefix,
      request.key,
      [
        String(LEASE_MODE.acquire),
        String(this.#now()),
        request.id,
        String(request.limit),
        String(request.leaseMs),
      ],
      within as Within<unknown> | undefined,
    ) as Promise<LeaseDecision>
  }

  async release(request: Omit<LeaseRequest, 'limit'>, within?: CallBound): Promise<void> {
    await this.#lease(
      request.prefix,
      request.key,
      [String(LEASE_MODE.release), String(this.#now()), request.id, '0', '0'],
      within && { timeoutMs: within.timeoutMs, call: within.call },
    )
  }

  /** The Redis key (a sorted set) holding the in-flight leases of `key` under a limiter `prefix`. */
  leaseKeyFor(prefix: string, key: string): string {
    return `${this.#base(prefix, key)}cc`
  }

  /**
   * Queues a lease script call for its node, grouped like decisions (lease calls of one slot in one execution,
   * apart from decisions); `within` bounds the wait once sent.
   */
  #lease(prefix: string, key: string, args: string[], within: Within<unknown> | undefined): Promise<unknown> {
    return this.#submit({ prepared: LEASE_PREPARED, base: this.leaseKeyFor(prefix, key), args }, within)
  }

  /** Queues one script call for the node of its keys (their hash slot on a Cluster). */
  #submit(call: ScriptCall, within: Within<unknown> | undefined, held = false): Promise<unknown> {
    // A client making its first connection: the call waits, unsent, then goes (once) to the node it then knows.
    const ready = held ? undefined : this.#ready?.wait(this.#maxWaiting)
    if (ready !== undefined) return ready.then(() => this.#submit(call, within, true))
    const runner = this.#runner
    const { batchKey } = call.prepared
    if (!runner.cluster) return this.#groups.submit('', batchKey, call, within, this.#maxWaiting)
    // On a Cluster, calls of one slot go together, and the slots of a node fly together.
    const slot = clusterSlot(call.base)
    const node = nodeFor(runner, slot)
    return this.#groups.submit(node, `${slot}:${batchKey}`, call, within, this.#maxWaiting)
  }

  async reset(target: StoreTarget): Promise<void> {
    const base = this.#base(target.prefix, target.key)
    // The penalty key goes too, whether or not the limiter still has a penalty: a reset clears a block.
    await this.#runner.del([...target.rules.map((rule) => `${base}${rule.id}`), `${base}${PENALTY_SUFFIX}`])
  }

  #base(prefix: string, key: string, hash = this.#hashes.of(key)): string {
    return `${this.#prefix}${prefix}{${hash}}:`
  }

  /**
   * PERF: the group's promise resolves with the decision itself, decoded from the group's reply
   * (reply.ts): no `then` here, no closure per call. A synchronous throw on the way (a bad key, a bad clock) still
   * rejects.
   */
  #decide(request: StoreRequest, mode: number, at: number, within: CallBound | undefined): Promise<Decision> {
    return this.#run(request, mode, at, within) as Promise<Decision>
  }

  /**
   * Queues the rule set's script call for its node: sent at once when nothing is in flight there, else with the
   * next group. Resolves with what `decodeDecision` reads from its reply; a late reply reaches `within.late` the same.
   */
  #run(
    request: StoreRequest,
    mode: number,
    at: number,
    within: CallBound | undefined,
    now = this.#now(),
    hash = this.#hashes.of(request.key),
  ): Promise<unknown> {
    try {
      const scope = request.overrides
      const call: DecisionCall = {
        prepared: this.#prepare(request.rules, request.penalty, scope, request.plan),
        request,
        base: this.#base(request.prefix, request.key, hash),
        mode,
        now,
        at,
        record: scope === undefined ? undefined : this.#recordKey(scope, hash),
        eviction: this.#eviction,
      }
      // The bound is only read: its late hook receives a `Decision` (a `LeaseDecision` for leases), as decoded.
      return this.#submit(call, within as Within<unknown> | undefined)
    } catch (error) {
      return Promise.reject(error)
    }
  }

  /**
   * The rule set's script, key suffixes and rendered arguments, built on first use. Cached per rule array (the
   * limiter passes the same one on every request) and, with a penalty, per penalty object; with overrides, per
   * override scope too.
   */
  #prepare(
    rules: readonly Rule[],
    penalty: Penalty | undefined,
    scope: string | undefined,
    plan: StoreRequest['plan'],
  ): Prepared {
    const now = this.#processNow
    if (scope !== undefined) return this.#withOverrides.get(rules, penalty, scope, decodeDecision, now, plan)
    let prepared = penalty === undefined ? this.#prepared.get(rules) : this.#preparedWithPenalty.get(rules)
    if (
      prepared === undefined ||
      (penalty !== undefined && prepared.penalty !== penalty) ||
      passed(prepared, now)
    ) {
      prepared = prepareRuleSet(rules, penalty, undefined, decodeDecision, now)
      if (penalty === undefined) this.#prepared.set(rules, prepared)
      else this.#preparedWithPenalty.set(rules, prepared)
    }
    return prepared
  }

  /**
   * This process's time (the store's `clock`, else `Date.now`), for the bounds of a quota's period: the script picks
   * the period holding its own `now` among them.
   */
  readonly #processNow = (): number => (this.#clock === undefined ? Date.now() : Math.floor(this.#clock()))

  #now(): number {
    if (this.#clock === undefined) return -1
    const now = Math.floor(this.#clock())
    if (!Number.isSafeInteger(now) || now < 0) {
      throw new RateLimitError(
        'ERR_RATEWINDOW_STORE',
        `\`clock\` returned ${now}: expected epoch milliseconds.`,
      )
    }
    return now
  }
}
