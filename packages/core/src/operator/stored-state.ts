/**
 * A limiter's state read back from a store without the code that made the limiter, for an operator's tools
 * (`@ratewindow/cli`'s `limiters`, `top`, `inspect` without a config): a namespace decoded into its prefix, group
 * and rules (the inverse of `namespaceOf` and `overrideScopeOf`), and a key known only by its hash inspected with
 * the limiter's own peek. Reading never counts, and never adds work to the decision path.
 */

import type { RecordedPlans } from '../algorithms/plans.js'
import { ruleFromId } from '../algorithms/rule-id.js'
import type { Rule } from '../algorithms/types.js'
import type { Awaitable, Decision, StoreRequest } from '../stores/types.js'
import { type Inspection, inspectionOf } from './inspection.js'

/** A namespace (or override scope) decoded: what its name tells of the limiter. */
export interface StoredNamespace {
  /** The namespace as found, e.g. `'rw:fw60000x100:'`. */
  namespace: string
  /** The limiter's `prefix` option. */
  prefix: string
  /** `'counters'`: a limiter's state; `'overrides'`: its override records (`overrides: true`). */
  kind: 'counters' | 'overrides'
  /** The limiter's `group`, when it has one. */
  group?: string
  /** True for a route limiter's namespace (Fastify's per-route `config.rateLimit`): the route is hashed. */
  routeScoped: boolean
  /**
   * The rules with their coded limits, when the name spells them; absent when it does not (a group's namespace,
   * a signature longer than 48 characters kept as its hash, a `limit` function's window rules): a config then
   * tells them.
   */
  rules?: readonly Rule[]
  /** The rules' storage ids, when the name spells them (a `limit` function's namespace has ids without limits). */
  ruleIds?: readonly string[]
}

/** An 11-character short hash (`shortHash` in namespaces.ts). */
const SHORT_HASH = /^[A-Za-z0-9_-]{11}$/

/** The namespace (or override scope) `namespace` decoded, or undefined when it is not one a limiter writes. */
export function decodeNamespace(namespace: string): StoredNamespace | undefined {
  if (!namespace.endsWith(':')) return undefined
  const body = namespace.slice(0, -1)
  const colon = body.lastIndexOf(':')
  if (colon === -1) return undefined
  const base = { namespace, prefix: body.slice(0, colon) }
  const tail = body.slice(colon + 1)
  const group = /^(o\.)?g=([A-Za-z0-9_.-]{1,64})$/.exec(tail)
  if (group !== null)
    return { ...base, kind: group[1] ? 'overrides' : 'counters', group: group[2]!, routeScoped: false }
  const scope = /^o\.(?:([A-Za-z0-9_-]{11})\.)?n=(?:[A-Za-z0-9_-]{11})?$/.exec(tail)
  if (scope !== null) return { ...base, kind: 'overrides', routeScoped: scope[1] !== undefined }
  const dot = tail.indexOf('.')
  if (dot !== -1 && !SHORT_HASH.test(tail.slice(0, dot))) return undefined
  const signature = tail.slice(dot + 1)
  const counters: StoredNamespace = { ...base, kind: 'counters', routeScoped: dot !== -1 }
  const ids: string[] = []
  const rules: Rule[] = []
  for (const part of signature.split('+')) {
    const spelled = /^([a-z]+[0-9-]+)x(\d+|\*)$/.exec(part)
    // Not spelled: a long signature kept as its short hash.
    if (spelled === null) return SHORT_HASH.test(signature) ? counters : undefined
    ids.push(spelled[1]!)
    const rule = ruleFromId(spelled[1]!, spelled[2] === '*' ? undefined : Number(spelled[2]))
    if (rule !== undefined) rules.push(rule)
  }
  counters.ruleIds = ids
  if (rules.length === ids.length) counters.rules = rules
  return counters
}

/** A store that can peek at a key known as it holds it (`RedisStore`: its hash; `MemoryStore`: its id). */
export interface StoredStateReader {
  peekStored(request: StoreRequest, hash: string): Awaitable<Decision>
}

/** One key of one limiter, known by its hash: what `inspectStored` reads. */
export interface StoredTarget {
  /** The limiter's namespace. */
  namespace: string
  /** The key's hash tag (`storedHash`). */
  hash: string
  /** The limiter's rules (decoded from the namespace, or the limiter's own). */
  rules: readonly Rule[]
  /** The limiter's override scope, to decide with the key's override and block as the limiter would. */
  overrides?: string
  /** What the inspection names the key: its raw key where known (an override record holds it), else the hash. */
  key?: string
  /**
   * The limiter's plans (`limiter.operator.plans`): the key is read with the plan the store recorded for it, that
   * plan's limits as the code gives them.
   */
  plans?: RecordedPlans
}

/** Where a key known by its hash stands: a peek, as `inspect` reads it, changing nothing (one store call). */
export async function inspectStored(store: StoredStateReader, target: StoredTarget): Promise<Inspection> {
  const request: StoreRequest = { prefix: target.namespace, key: target.hash, rules: target.rules, cost: 1 }
  if (target.overrides !== undefined) request.overrides = target.overrides
  if (target.plans !== undefined) request.plan = target.plans
  const decision = await store.peekStored(request, target.hash)
  return inspectionOf(target.key ?? target.hash, request, decision)
}
