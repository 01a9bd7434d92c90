/**
 * Reading a decision call's record in a group's reply (the "Replies" table of script-table.ts): what its promise
 * resolves to. The group's reply is read once (send-group.ts), each call's record by `decodeDecision`, and
 * nothing is built per call but the value.
 */
import type { RuleOutcome } from '../../algorithms/types.js'
import type { Charged, Decision } from '../types.js'
import { underRecord } from './overrides.js'
import { repairedRules } from './repaired.js'
import { MODE } from './script.js'
import type { DecisionCall, ScriptCall } from './send-group.js'

/**
 * What a decision call resolves to, read from its record of the reply (script.ts): a `Decision` (a refund's says
 * only that it was applied, at the server's `now`, and what was repaired), or a charge's units and outcomes.
 */
export function decodeDecision(
  scriptCall: ScriptCall,
  reply: readonly unknown[],
  start: number,
  length: number,
): unknown {
  const call = scriptCall as DecisionCall
  const { request } = call
  const rules = request.rules.length
  if (call.mode === MODE.refund || call.mode === MODE.give) {
    const refunded: Decision = { allowed: true, now: Number(reply[start + 1]), outcomes: [] }
    const mask = Number(reply[start + 2])
    if (mask) refunded.notices = repairedRules(request, mask)
    return refunded
  }
  const mask = Number(reply[start + 2 + 3 * rules])
  const outcomes: RuleOutcome[] = new Array(rules)
  for (let i = 0, at = start + 2; i < rules; i++, at += 3) {
    outcomes[i] = {
      remaining: Number(reply[at]),
      reset: Number(reply[at + 1]),
      retryAfter: Number(reply[at + 2]),
    }
  }
  if (call.mode === MODE.charge) {
    // The units charged in place of `allowed`, and the rules' outcomes after the charge.
    const charged: Charged = { charged: Number(reply[start]), outcomes, now: Number(reply[start + 1]) }
    if (mask) charged.notices = repairedRules(request, mask)
    return charged
  }
  // A peek's record ends with the units each rule counts.
  if (call.mode === MODE.peek)
    for (let i = 0, at = start + length - rules; i < rules; i++, at++) outcomes[i]!.used = Number(reply[at])
  // A reservation answers 1 + its wait (ms) in place of 1.
  const first = Number(reply[start])
  const decision: Decision = { allowed: first >= 1, now: Number(reply[start + 1]), outcomes }
  if (first > 1) decision.wait = first - 1
  const blocked = request.penalty === undefined ? 0 : Number(reply[start + 3 + 3 * rules])
  if (blocked > 0) decision.blocked = blocked
  // No arrays built on the common path, where nothing was repaired and no eviction is due.
  const evicted = call.eviction.poll()
  if (mask || evicted?.length) decision.notices = [...repairedRules(request, mask), ...(evicted ?? [])]
  if (call.record !== undefined) {
    const at = start + 3 + 3 * rules + (request.penalty ? 1 : 0)
    underRecord(decision, request, reply[at], request.plan === undefined ? undefined : reply[at + 1])
  }
  return decision
}
