import type { Penalty } from '../../algorithms/penalty.js'
import { type PlanTerms, RecordedPlans } from '../../algorithms/plans.js'
import { quotaBounds } from '../../algorithms/quota.js'
import type { Rule } from '../../algorithms/types.js'
import { RateLimitError } from '../../support/errors.js'
import type { StoreRequest } from '../types.js'
import {
  type BatchCall,
  batchArguments,
  batchScriptFor,
  callKeys,
  eachRecord,
  singleArguments,
} from './batch-script.js'
import type { RedisScriptRunner } from './clients/index.js'
import type { EvictionWatch } from './eviction.js'
import type { Entry } from './groups.js'
import { LEASE_BATCH_SCRIPT, LEASE_SCRIPT, toLeaseDecision } from './lease-script.js'
import type { LoadedScripts } from './loaded-scripts.js'
import { overrideArgs } from './override-lua.js'
import { PLAN_SUFFIX } from './plan-lua.js'
import { paramCount, type Script, scriptFor } from './script.js'

/**
 * What the store sends for one rule set, rendered once: its script, the keys' suffixes, the arguments after the
 * mode, now and cost (the rules' parameters, then the penalty's), and how a call's reply is read.
 */
export interface Prepared {
  script: Script
  /** The same decisions for a group of calls (batch-script.ts). */
  batch: Script
  /**
   * What calls must share to go in one batch: the script and its shared arguments (the rules' parameters and
   * the penalty's), which a batch sends once. Two limiters with the same algorithms but other limits differ.
   */
  batchKey: string
  suffixes: string[]
  args: string[]
  penalty: Penalty | undefined
  /**
   * With a quota rule: when (epoch ms, the deciding process's clock) the period its arguments bound ends, and the
   * rule set must be prepared again with the next period's (`quotaBounds`); undefined without one.
   */
  until?: number | undefined
  /** With a quota rule: when that period starts; a process clock set back before it prepares the rule set again. */
  from?: number | undefined
  /**
   * What a call's promise resolves to (and its late hook receives), read from its record in the reply: `length`
   * numbers from `start` (script-table.ts, "Replies"). The reply is read once per group, and nothing is built per
   * call but this value.
   */
  decode(call: ScriptCall, reply: readonly unknown[], start: number, length: number): unknown
}

/** One decision waiting for its group (a consume, peek, reservation, refund or charge of one client). */
export interface DecisionCall extends BatchCall {
  readonly prepared: Prepared
  readonly request: StoreRequest
  /** The store's watch on the server's eviction policy, whose warning rides on a decision (reply.ts). */
  readonly eviction: EvictionWatch
}

/** One lease call waiting for its group: its sorted set (`base`) and the lease script's five arguments. */
export interface LeaseCall {
  readonly prepared: typeof LEASE_PREPARED
  readonly base: string
  readonly args: string[]
}

export type ScriptCall = DecisionCall | LeaseCall

/** What lease calls send: they group like decisions, apart from them (their own batch script). */
export const LEASE_PREPARED: Prepared = {
  script: LEASE_SCRIPT,
  batch: LEASE_BATCH_SCRIPT,
  batchKey: 'lease',
  suffixes: [''],
  args: [],
  penalty: undefined,
  decode: (_call, reply, start) => toLeaseDecision(reply, start),
}

/** The numbers of one lease call's reply. */
const LEASE_REPLY = 3

/**
 * Sends one group of calls (one script and slot) and answers each call's value, decoded from the one reply. One
 * call goes as the single-decision script, exactly as without grouping.
 */
export function sendGroup(
  runner: RedisScriptRunner,
  scripts: LoadedScripts,
  entries: readonly Entry<ScriptCall, unknown>[],
): Promise<unknown[]> {
  const first = entries[0]!.payload
  const { prepared } = first
  if (entries.length === 1) {
    const args = isLease(first) ? first.args : singleArguments(first, prepared.args)
    const keys = isLease(first) ? [first.base] : callKeys(first, prepared.suffixes)
    return scripts.run(prepared.script, keys, args).then((reply) => {
      if (!Array.isArray(reply) || reply.length < 2) throw unexpected(runner, reply)
      return [prepared.decode(first, reply, 0, reply.length)]
    })
  }
  if (prepared === LEASE_PREPARED) {
    const keys: string[] = []
    const args: string[] = []
    for (const { payload } of entries) {
      keys.push(payload.base)
      for (const arg of (payload as LeaseCall).args) args.push(arg)
    }
    return scripts.run(prepared.batch, keys, args).then((reply) => {
      if (!Array.isArray(reply) || reply.length !== LEASE_REPLY * entries.length)
        throw unexpected(runner, reply)
      return entries.map(({ payload }, i) => prepared.decode(payload, reply, LEASE_REPLY * i, LEASE_REPLY))
    })
  }
  const calls = entries.map((entry) => entry.payload as DecisionCall)
  const { keys, args } = batchArguments(calls, prepared.suffixes, prepared.args)
  return scripts.run(prepared.batch, keys, args).then((reply) => {
    const values: unknown[] = new Array(calls.length)
    const read =
      Array.isArray(reply) &&
      eachRecord(reply, calls.length, (call, start, length) => {
        values[call] = prepared.decode(calls[call]!, reply, start, length)
      })
    if (!read) throw unexpected(runner, reply)
    return values
  })
}

function isLease(call: ScriptCall): call is LeaseCall {
  return call.prepared === LEASE_PREPARED
}

/** A store error naming the client family, for a reply that is not what the script returns. */
function unexpected(runner: RedisScriptRunner, reply: unknown): RateLimitError {
  return new RateLimitError(
    'ERR_RATEWINDOW_STORE',
    `Unexpected reply from the rate limit script (${runner.family}): ${String(reply)}`,
  )
}

/** The key suffix of a client's penalty state, beside its rule keys. */
export const PENALTY_SUFFIX = 'pen'

/**
 * What the store sends for a rule set (and a penalty, or none; with overrides, the records of `scope`), rendered
 * once; `decode` reads a call's reply.
 */
export function prepareRuleSet(
  rules: readonly Rule[],
  penalty: Penalty | undefined,
  scope: string | undefined,
  decode: Prepared['decode'],
  now: () => number = Date.now,
  plan?: PlanTerms | RecordedPlans,
): Prepared {
  let until: number | undefined
  let from: number | undefined
  const args = rules.flatMap((rule) => {
    if (rule.periods === undefined)
      return rule.script.params.slice(0, paramCount(rule.script.code)).map(String)
    // A quota: its limit, then the bounds of the period at this process's time.
    const bounds = quotaBounds(rule, now())
    until = Math.min(until ?? bounds[1], bounds[1])
    from = Math.max(from ?? bounds[0], bounds[0])
    return [String(rule.limit), ...bounds.map(String)]
  })
  const suffixes = rules.map((rule) => rule.id)
  if (penalty !== undefined) {
    suffixes.push(PENALTY_SUFFIX)
    for (const value of [penalty.after, penalty.within, penalty.block, penalty.factor, penalty.maxBlock])
      args.push(String(value))
  }
  if (scope !== undefined) args.push(...overrideArgs(rules))
  // A planned limiter's (always with a scope): the plan key, and the plan's JSON and lifetime ('' reads the recorded).
  const planned = scope !== undefined && plan !== undefined
  if (planned) {
    suffixes.push(PLAN_SUFFIX)
    // A read of the recorded plan: '' and the plans' limits by name (the script takes the recorded name's).
    if (plan instanceof RecordedPlans) args.push('', plan.table)
    else args.push(plan.recorded, String(plan.horizonMs))
  }
  const codes = rules.map((rule) => rule.script.code)
  const script = scriptFor(codes, penalty !== undefined, scope !== undefined, planned)
  return {
    script,
    batch: batchScriptFor(codes, penalty !== undefined, scope !== undefined, planned),
    // Calls with overrides read their scope's records: only calls of one scope share a batch.
    batchKey: `${script.sha1}:${scope === undefined ? '' : `${scope}:`}${args.join(',')}`,
    suffixes,
    args,
    penalty,
    until,
    from,
    decode,
  }
}
