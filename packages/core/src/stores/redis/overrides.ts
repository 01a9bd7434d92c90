/**
 * RedisStore's override records: a change, a read and a page of the list, each one script execution
 * (override-scripts.ts), and the arguments a decision script with overrides takes beside the rules' own.
 */
import {
  liveOverrideRecord,
  type OverrideChange,
  type OverrideRecord,
  rulesWith,
} from '../../algorithms/override.js'
import type { Penalty } from '../../algorithms/penalty.js'
import { limitsInForce, type PlanTerms, RecordedPlans } from '../../algorithms/plans.js'
import type { Rule } from '../../algorithms/types.js'
import type { Decision, OverridePage, StoreRequest } from '../types.js'
import type { RedisScriptRunner } from './clients/index.js'
import type { LoadedScripts } from './loaded-scripts.js'
import { scanStep } from './master-scan.js'
import { RECORD_SUFFIX } from './override-lua.js'
import {
  LIST_OVERRIDES_SCRIPT,
  literalPattern,
  READ_OVERRIDE_SCRIPT,
  UPDATE_OVERRIDE_SCRIPT,
} from './override-scripts.js'
import { scriptOf } from './script.js'
import { type Prepared, prepareRuleSet } from './send-group.js'

/** The server's TIME in epoch ms (`give` without a store clock), on the node of KEYS[1]. */
export const TIME_SCRIPT = scriptOf(`local time = redis.call('TIME')
return time[1] * 1000 + math.floor(time[2] / 1000)
`)

export async function updateOverride(
  scripts: LoadedScripts,
  recordKey: string,
  key: string,
  change: OverrideChange,
  now: number,
): Promise<OverrideRecord | undefined> {
  const limits =
    change.limits === null ? 'null' : change.limits === undefined ? '' : JSON.stringify(change.limits)
  const block = change.block === null ? 'null' : change.block === undefined ? '' : String(change.block.forMs)
  // The reason after one character: '' says none.
  const reason = change.block?.reason === undefined ? '' : `-${change.block.reason}`
  const ttl = change.ttlMs === undefined ? '' : String(change.ttlMs)
  const reply = await scripts.run(
    UPDATE_OVERRIDE_SCRIPT,
    [recordKey],
    [String(now), key, limits, ttl, block, reason],
  )
  return parseRecord(reply)
}

export async function readOverride(
  scripts: LoadedScripts,
  recordKey: string,
  now: number,
): Promise<OverrideRecord | undefined> {
  return parseRecord(await scripts.run(READ_OVERRIDE_SCRIPT, [recordKey], [String(now)]))
}

/**
 * The COUNT hints of the SCAN steps of a page: at most `SCAN_COUNT_MAX` (SCAN runs in one go on the server, so a
 * hint of millions, an operator's `list({ count: 10_000_000 })`, would stall every other client of Redis while it
 * walks the keyspace), at least `SCAN_COUNT_MIN` (so that a small page does not take a round trip per few keys).
 */
export const SCAN_COUNT_MAX = 1_000
const SCAN_COUNT_MIN = 100

/**
 * The most SCAN steps of one page (at most 100,000 keys read): a page of sparse records on a large keyspace ends
 * there, with fewer records than asked and the cursor to go on, bounded in time as every store call is.
 */
const SCAN_STEPS_MAX = 100

/**
 * A page of the records under `scopeKeys` (the store's prefix and the scope): SCAN steps (`scanStep`: on a
 * Cluster, each master in turn) of a COUNT hint of `page.count` within [`SCAN_COUNT_MIN`, `SCAN_COUNT_MAX`],
 * until `page.count` records are found (a last step may add up to its hint more), the scan ends, or
 * `SCAN_STEPS_MAX` steps are done.
 */
export async function listOverrides(
  runner: RedisScriptRunner,
  scripts: LoadedScripts,
  scopeKeys: string,
  page: { cursor?: string | undefined; count: number },
  now: number,
): Promise<OverridePage> {
  const pattern = `${literalPattern(scopeKeys)}{*}:${RECORD_SUFFIX}`
  const hint = String(Math.min(Math.max(page.count, SCAN_COUNT_MIN), SCAN_COUNT_MAX))
  const records: OverrideRecord[] = []
  let cursor = page.cursor
  let steps = 0
  do {
    const step = await scanStep(runner, scripts, LIST_OVERRIDES_SCRIPT, cursor, (scan) => [
      String(now),
      scan,
      pattern,
      hint,
    ])
    for (let i = 1; i < step.reply.length; i++) {
      const record = parseRecord(step.reply[i])
      if (record !== undefined) records.push(record)
    }
    cursor = step.cursor
  } while (records.length < page.count && cursor !== undefined && ++steps < SCAN_STEPS_MAX)
  return { records, cursor }
}

/**
 * A record from a script's reply or a key's value: its JSON, or '' for none. Unreadable content reads as none, as
 * the decision script reads it (`readRecord`).
 */
export function parseRecord(reply: unknown): OverrideRecord | undefined {
  if (typeof reply !== 'string' || reply === '') return undefined
  try {
    const record: unknown = JSON.parse(reply)
    return typeof record === 'object' && record !== null ? (record as OverrideRecord) : undefined
  } catch {
    return undefined
  }
}

/**
 * The Redis key of the override record of a client key under a limiter's override `scope`: `hash` is the client
 * key's hash tag (the one its counters have, so one Cluster slot). RedisStore and SyncedStore both: a process of
 * each on one Redis, with the same store `prefix`, read and write the same records.
 */
export function overrideRecordKey(storePrefix: string, scope: string, hash: string): string {
  return `${storePrefix}${scope}{${hash}}:${RECORD_SUFFIX}`
}

/**
 * A decision made under the override record the decision script answered (its JSON, '' for none) and, for a planned
 * limiter, the plan it applied (`plan`: the name the script answered; for a read of the recorded plan, the limiter's
 * plan of that name): the limits and the block in force, and the plan's name.
 */
export function underRecord(decision: Decision, request: StoreRequest, reply: unknown, plan?: unknown): void {
  const record =
    typeof reply === 'string' && reply !== ''
      ? liveOverrideRecord(JSON.parse(reply) as OverrideRecord, decision.now)
      : undefined
  const requested = request.plan
  const terms =
    requested instanceof RecordedPlans
      ? typeof plan === 'string'
        ? requested.byName.get(plan)
        : undefined
      : requested
  if (terms !== undefined) decision.plan = terms.name
  if (record?.limits !== undefined) decision.override = record.limits
  const limits = limitsInForce(record?.limits, terms?.limits)
  if (limits !== undefined) {
    const inForce = rulesWith(request.rules, limits)
    if (inForce !== request.rules) decision.rules = inForce
  }
  if (record?.block !== undefined) {
    decision.manualBlock = record.block
    decision.allowed = false
    decision.blocked = Math.max(1, record.block.until - decision.now)
  }
}

/** The server's TIME in epoch ms, on the node of `key`. */
export async function serverNow(scripts: LoadedScripts, key: string): Promise<number> {
  return Number(await scripts.run(TIME_SCRIPT, [key], []))
}

/** What the store sends for rule sets read with their override records: per rule array, per scope, per plan. */
export class PreparedWithOverrides {
  readonly #cache = new WeakMap<
    readonly Rule[],
    Map<string, Map<PlanTerms | RecordedPlans | undefined, Prepared>>
  >()

  get(
    rules: readonly Rule[],
    penalty: Penalty | undefined,
    scope: string,
    decode: Prepared['decode'],
    now: () => number,
    plan?: PlanTerms | RecordedPlans,
  ): Prepared {
    let scopes = this.#cache.get(rules)
    if (scopes === undefined) {
      scopes = new Map()
      this.#cache.set(rules, scopes)
    }
    let plans = scopes.get(scope)
    if (plans === undefined) {
      plans = new Map()
      scopes.set(scope, plans)
    }
    let prepared = plans.get(plan)
    if (prepared === undefined || prepared.penalty !== penalty || passed(prepared, now)) {
      prepared = prepareRuleSet(rules, penalty, scope, decode, now, plan)
      plans.set(plan, prepared)
    }
    return prepared
  }
}

/**
 * Whether a rule set prepared with a quota's period bounds (`Prepared.until`, `from`) is outside that period: past
 * it, or before it (a process clock set back).
 */
export function passed(prepared: Prepared, now: () => number): boolean {
  if (prepared.until === undefined) return false
  const at = now()
  return at >= prepared.until || at < prepared.from!
}
