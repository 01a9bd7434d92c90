import type { Rule } from '../algorithms/types.js'
import type { Store } from '../stores/types.js'
import { invalid } from '../support/errors.js'
import { sha256Base64url } from '../support/hash.js'
import { emitWarning } from '../support/runtime.js'

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
  /**
   * What the superseded warning advises when both limiters are meant to serve, for a limiter whose options differ
   * from `rateLimit()`'s (slowDown() has no `group`). @default give each its own `prefix`, or the same `group`
   */
  sharing?: string
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
  return sha256Base64url(text).slice(0, 11)
}

/**
 * A limiter's hold on its namespace. `superseded` turns true when a newer limiter of this process claims the same
 * namespace of the same store (an app rebuilt per test, a module reloaded by a dev server): the newest claim
 * wins, and the older limiter warns once if it still decides (`RATEWINDOW_SUPERSEDED_LIMITER`).
 */
export interface NamespaceClaim {
  readonly superseded: boolean
  /** Gives the namespace up (e.g. when a Fastify instance closes, or `close()` of a middleware). */
  release(): void
}

class Holder implements NamespaceClaim {
  superseded = false
  constructor(
    readonly table: Map<string, Claim>,
    readonly namespace: string,
    /** Weakly held: a limiter that was garbage-collected no longer holds its namespace. */
    readonly owner: WeakRef<object>,
  ) {}

  release(): void {
    const claim = this.table.get(this.namespace)
    if (claim === undefined) return
    claim.holders.delete(this)
    if (claim.holders.size === 0) this.table.delete(this.namespace)
  }
}

interface Claim {
  group: string | undefined
  /** Rules with limits: the members of a group share one budget only with the same rules. */
  rules: string
  /** The limiters counting here now: one, or the members of one group. */
  holders: Set<Holder>
}

/** Namespaces claimed in this process, per store object. */
const claims = new WeakMap<Store, Map<string, Claim>>()

/**
 * Records that a limiter counts under `namespace` in `store`. A limiter of this process that already counts there
 * (without both being members of one group with the same rules) is superseded: the newest claim wins, so that an
 * app rebuilt in one process (tests, dev-server reloads) keeps working, and the older limiter, if it still
 * decides, warns that two limiters share a counter (see `warnSuperseded`).
 */
export function claimNamespace(
  store: Store,
  namespace: string,
  rules: readonly Rule[],
  group: string | undefined,
  owner: object,
): NamespaceClaim {
  let table = claims.get(store)
  if (table === undefined) {
    table = new Map()
    claims.set(store, table)
  }
  const signature = rules.map((rule) => `${rule.id}x${rule.limit}`).join('+')
  const existing = table.get(namespace)
  if (existing !== undefined) {
    for (const holder of existing.holders) {
      const held = holder.owner.deref()
      if (held === undefined) existing.holders.delete(holder)
      // Limiters made for one owner (the limits of one `limit` function) share its claim.
      else if (held === owner) return holder
    }
  }
  const holder = new Holder(table, namespace, new WeakRef(owner))
  if (existing !== undefined && existing.group !== undefined && existing.group === group) {
    if (existing.rules === signature) {
      existing.holders.add(holder)
      return holder
    }
  }
  if (existing !== undefined) for (const older of existing.holders) older.superseded = true
  table.set(namespace, { group, rules: signature, holders: new Set([holder]) })
  return holder
}

/** The superseded warning's advice for two limiters meant to serve (see `Identity.sharing`). */
const SHARING =
  'give each its own `prefix` to count apart, or the same `group` (with the same rules) to share one budget on purpose.'

/** Limiters warned about already: once each. */
const warned = new WeakSet<object>()

/**
 * The process warning of a superseded limiter that still decides (once per limiter): two limiters of this process
 * count into one namespace. Harmless when the older one belongs to an app that was replaced and is about to go;
 * a mistake when both are meant to serve.
 */
export function warnSuperseded(
  limiter: object,
  name: string,
  namespace: string,
  group: string | undefined,
  sharing = SHARING,
): void {
  if (warned.has(limiter)) return
  warned.add(limiter)
  const what =
    group === undefined
      ? 'a newer limiter with the same rules and `prefix` on the same store'
      : `a newer member of \`group\` '${group}' with other rules`
  try {
    emitWarning(
      `Limiter ${name} was superseded by ${what}, and still decides: both count the counters under \`${namespace}\`. ` +
        'If the old app was replaced (a test that builds the app again, a reloaded module), call `close()` on its ' +
        `middleware (or \`release()\` on its limiter) when it goes. If both are meant to serve, ${sharing}`,
      'RATEWINDOW_SUPERSEDED_LIMITER',
    )
  } catch {
    // a warning listener that throws: nothing more can be done without risking the request
  }
}
