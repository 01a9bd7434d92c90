import { createHash } from 'node:crypto'
import type { Rule } from './algorithms/types.js'
import { invalid, RateLimitError } from './errors.js'
import type { Store } from './stores/types.js'

/**
 * Counter identity (docs/counters.md). A limiter's counters live under a namespace of its store; two limiters
 * share counters exactly when their namespaces are equal. The namespace is derived, never left to chance:
 *
 * - with a `group`: `<prefix>:g=<group>:`, the same for every member, so the group shares one budget;
 * - otherwise: `<prefix>:<scope>.<rules>:`, where `<rules>` holds each rule's algorithm, window and limit,
 *   and `<scope>` is the Fastify route for a route limiter. Different rules never meet; a changed limit starts
 *   from fresh counters (the old keys expire).
 *
 * NOTE: a `limit` function gives one namespace for all its limits (`*` in place of the limit), so a client
 * whose limit changes with its plan keeps its count.
 */
export interface Identity {
  /** What scopes the limiter besides its rules, e.g. `'GET /login'` for a Fastify route limiter. */
  scope?: string | undefined
  /** The limit is a function of the request: the namespace leaves limits out. */
  dynamicLimit?: boolean
  /** Limiters made for one owner (the limits of one `limit` function) may claim one namespace. */
  owner?: object
}

/** Validates `group`: a short token, like a rule name. */
export function parseGroup(value: unknown): string | undefined {
  if (value === undefined) return undefined
  if (typeof value !== 'string' || !/^[A-Za-z0-9_.-]{1,64}$/.test(value)) {
    throw invalid(
      'ERR_RATEWINDOW_INVALID_OPTION',
      'group',
      value,
      "a short name of letters, digits, `_`, `.`, `-` such as 'login'",
    )
  }
  return value
}

/** The namespace a limiter's counters live under in its store. */
export function namespaceOf(
  prefix: string,
  rules: readonly Rule[],
  group: string | undefined,
  identity: Identity,
): string {
  if (group !== undefined) return `${prefix}:g=${group}:`
  const signature = rules.map((rule) => `${rule.id}x${identity.dynamicLimit ? '*' : rule.limit}`).join('+')
  const scope = identity.scope === undefined ? '' : `${shortHash(identity.scope)}.`
  return `${prefix}:${scope}${signature.length > 48 ? shortHash(signature) : signature}:`
}

function shortHash(text: string): string {
  return createHash('sha256').update(text).digest('base64url').slice(0, 11)
}

interface Claim {
  group: string | undefined
  /** Rules with limits: the members of a group must agree on them. */
  rules: string
  /** Weakly held: a limiter that was garbage-collected no longer holds its namespace. */
  owner: WeakRef<object>
}

/** Namespaces claimed in this process, per store object. */
const claims = new WeakMap<Store, Map<string, Claim>>()

/**
 * Records that a limiter counts under `namespace` in `store`, and throws `ERR_RATEWINDOW_SHARED_COUNTER` when
 * another limiter of this process already does without both being in one group: they would silently share a
 * counter. Returns a function that releases the claim (e.g. when a Fastify instance closes).
 */
export function claimNamespace(
  store: Store,
  namespace: string,
  rules: readonly Rule[],
  group: string | undefined,
  owner: object,
): () => void {
  let byNamespace = claims.get(store)
  if (byNamespace === undefined) {
    byNamespace = new Map()
    claims.set(store, byNamespace)
  }
  const signature = rules.map((rule) => `${rule.id}x${rule.limit}`).join('+')
  const existing = byNamespace.get(namespace)
  const holder = existing?.owner.deref()
  if (existing !== undefined && holder !== undefined && holder !== owner) {
    if (group === undefined) {
      throw new RateLimitError(
        'ERR_RATEWINDOW_SHARED_COUNTER',
        `Two limiters on one store would share the counters under \`${namespace}\` (same rules, same \`prefix\`), so each request would count against both. Give each limiter its own \`prefix\` to keep separate counts, or the same \`group\` (e.g. group: 'login') to share one budget on purpose.`,
        { option: 'prefix' },
      )
    }
    if (existing.rules !== signature) {
      throw new RateLimitError(
        'ERR_RATEWINDOW_SHARED_COUNTER',
        `The limiters of \`group\` '${group}' share one budget, so they need the same rules (limit, window, algorithm); this one differs from the first member. Give them the same rules, or different groups.`,
        { option: 'group' },
      )
    }
    return () => {}
  }
  if (holder === undefined) byNamespace.set(namespace, { group, rules: signature, owner: new WeakRef(owner) })
  return () => {
    if (byNamespace.get(namespace)?.owner.deref() === owner) byNamespace.delete(namespace)
  }
}
