import type { Rule } from '../algorithms/types.js'
import type { Store } from '../stores/types.js'
import { formatDuration } from '../support/duration.js'
import { invalid, RateLimitError } from '../support/errors.js'
import { sha256Base64url } from '../support/hash.js'
import { emitWarning } from '../support/runtime.js'

/**
 * Counter identity (docs/counters.md). A limiter's counters live under a namespace of its store; two limiters
 * share counters exactly when their namespaces are equal. The namespace is derived, never left to chance:
 *
 * - with a `group`: `<prefix>:g=<group>:`, the same for every member, so the group shares one budget;
 * - otherwise: `<prefix>:<qualifier>.<rules>:`, where `<rules>` holds each rule's algorithm, window and limit,
 *   and `<qualifier>` is the Fastify route for a route limiter. Different rules never meet; a changed limit starts
 *   from fresh counters (the old keys expire).
 *
 * NOTE: a `limit` function gives one namespace for all its limits (`*` in place of the limit), so a client
 * whose limit changes with its plan keeps its count.
 */
export interface Identity {
  /** What qualifies the limiter's counters besides its rules, e.g. `'GET /login'` for a Fastify route limiter. */
  qualifier?: string | undefined
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
  const qualifier = identity.qualifier === undefined ? '' : `${shortHash(identity.qualifier)}.`
  return `${prefix}:${qualifier}${signature.length > 48 ? shortHash(signature) : signature}:`
}

/**
 * Where a limiter's override records live in its store (`overrides: true`): its prefix and group, or else its
 * route qualifier and `name`, and never its rules, so that a deploy that changes a limit in code keeps them and the
 * members of a group share them. Two unnamed limiters of one prefix (and route) share their records: a `name`
 * keeps them apart.
 */
export function overrideScopeOf(
  prefix: string,
  group: string | undefined,
  name: string | undefined,
  identity: Identity,
): string {
  if (group !== undefined) return `${prefix}:o.g=${group}:`
  const qualifier = identity.qualifier === undefined ? '' : `${shortHash(identity.qualifier)}.`
  return `${prefix}:o.${qualifier}n=${name === undefined ? '' : shortHash(name)}:`
}

function shortHash(text: string): string {
  return sha256Base64url(text).slice(0, 11)
}

/**
 * A limiter's hold on its namespace. `superseded` turns true when a newer limiter of this process claims the same
 * namespace of the same store (an app rebuilt per test, a module reloaded by a dev server): the newest claim
 * wins, and the older limiter warns if it still decides (`RATEWINDOW_SUPERSEDED_LIMITER`, once per namespace).
 */
export interface NamespaceClaim {
  readonly superseded: boolean
  /** Gives the namespace up (e.g. when a Fastify instance closes, or `close()` of a middleware). */
  release(): void
  /** Whether the superseded warning of this namespace is still to be written: true once per store and namespace. */
  firstWarning(): boolean
}

/** The namespaces claimed on one store object in this process. */
interface ClaimTable {
  readonly claims: Map<string, Claim>
  /** The namespaces whose superseded warning was written. */
  readonly warned: Set<string>
}

/**
 * The limiters counting under one namespace now: one limiter (or the limiters of one owner), or the members of
 * one group. Members are counted, not held: a member counts until it is released, so that whether a group is in
 * use never depends on the garbage collector (and `WeakRef`, missing on Workers before 2025-05-05, is not needed).
 */
class Claim {
  superseded = false
  /** Holders not released. */
  members = 0
  /** The holder of each owner: limiters made for one owner share it (weakly held). */
  readonly byOwner = new WeakMap<object, Holder>()

  constructor(
    readonly table: ClaimTable,
    readonly namespace: string,
    /** The rules with their limits (see `signatureOf`): the members of a group have the same. */
    readonly rules: string,
    /** `rules` as a person reads them, for the error. */
    readonly described: string,
  ) {}

  join(owner: object): Holder {
    const holder = new Holder(this)
    this.byOwner.set(owner, holder)
    return holder
  }
}

class Holder implements NamespaceClaim {
  #released = false

  constructor(readonly claim: Claim) {
    claim.members++
  }

  get superseded(): boolean {
    return this.claim.superseded
  }

  get released(): boolean {
    return this.#released
  }

  release(): void {
    if (this.#released) return
    this.#released = true
    const { claim } = this
    claim.members--
    const { claims } = claim.table
    if (claim.members === 0 && claims.get(claim.namespace) === claim) claims.delete(claim.namespace)
  }

  firstWarning(): boolean {
    const { table, namespace } = this.claim
    if (table.warned.has(namespace)) return false
    table.warned.add(namespace)
    return true
  }
}

/** Namespaces claimed in this process, per store object. */
const tables = new WeakMap<Store, ClaimTable>()

/**
 * Records that a limiter counts under `namespace` in `store`. Limiters made for one owner (the limits of one
 * `limit` function) share one claim. A member of a `group` joins the group's claim when its rules are the
 * group's, and is refused (`ERR_RATEWINDOW_INVALID_OPTION`, option `group`) when they are not: one budget cannot
 * have two sizes, and other windows or algorithms would count on counters of their own. Any other limiter of this
 * process that already counts there is superseded: the newest claim wins, so that an app rebuilt in one process
 * (tests, dev-server reloads) keeps working, and the older limiter, if it still decides, warns that two limiters
 * share a counter (see `warnSuperseded`).
 */
export function claimNamespace(
  store: Store,
  namespace: string,
  rules: readonly Rule[],
  group: string | undefined,
  owner: object,
  dynamicLimit = false,
): NamespaceClaim {
  let table = tables.get(store)
  if (table === undefined) {
    table = { claims: new Map(), warned: new Set() }
    tables.set(store, table)
  }
  const signature = signatureOf(rules, dynamicLimit)
  const existing = table.claims.get(namespace)
  if (existing !== undefined) {
    const own = existing.byOwner.get(owner)
    if (own !== undefined && !own.released) return own
    // The namespace of a group holds the group's name: what counts there is the same group.
    if (group !== undefined) {
      if (existing.rules !== signature) throw groupRulesDiffer(group, existing.described, rules, dynamicLimit)
      return existing.join(owner)
    }
    existing.superseded = true
  }
  const claim = new Claim(table, namespace, signature, describeRules(rules, dynamicLimit))
  table.claims.set(namespace, claim)
  return claim.join(owner)
}

/** The rules' storage ids with their limits (`*` for a `limit` function's): equal for the members of one group. */
function signatureOf(rules: readonly Rule[], dynamicLimit: boolean): string {
  return rules.map((rule) => `${rule.id}x${dynamicLimit ? '*' : rule.limit}`).join('+')
}

function describeRules(rules: readonly Rule[], dynamicLimit: boolean): string {
  return rules
    .map(
      (rule) =>
        `${rule.algorithm} ${dynamicLimit ? 'a `limit` function' : rule.limit} per ${formatDuration(rule.windowMs)}`,
    )
    .join(' + ')
}

function groupRulesDiffer(
  group: string,
  theirs: string,
  rules: readonly Rule[],
  dynamicLimit: boolean,
): RateLimitError {
  return new RateLimitError(
    'ERR_RATEWINDOW_INVALID_OPTION',
    `\`group\` '${group}' already counts on this store with ${theirs}; this limiter has ${describeRules(rules, dynamicLimit)}. ` +
      'A group is one budget: its members need the same rules (algorithm, window and limit), or members with ' +
      'other windows would count on counters of their own. Give every member the same rules, or this limiter ' +
      'another `group`. If the older members belong to an app that was replaced (a test that builds the app ' +
      'again, a reloaded module), call `close()` on their middleware (or `release()` on their limiters) first.',
    { option: 'group' },
  )
}

/** The superseded warning's advice for two limiters meant to serve (see `Identity.sharing`). */
const SHARING =
  'give each its own `prefix` to count apart, or the same `group` (with the same rules) to share one budget on purpose.'

/**
 * The process warning of a superseded limiter that still decides (once per namespace of a store, however many
 * limiters were superseded there): two limiters of this process count into one namespace. Harmless when the
 * older one belongs to an app that was replaced and is about to go; a mistake when both are meant to serve, or
 * when a limiter is built for each request.
 */
export function warnSuperseded(
  claim: NamespaceClaim,
  name: string,
  namespace: string,
  sharing = SHARING,
): void {
  if (!claim.firstWarning()) return
  try {
    emitWarning(
      `Limiter ${name} was superseded by a newer limiter with the same rules and \`prefix\` on the same store, and still decides: both count the counters under \`${namespace}\`. ` +
        'If the old app was replaced (a test that builds the app again, a reloaded module), call `close()` on its ' +
        `middleware (or \`release()\` on its limiter) when it goes. If both are meant to serve, ${sharing} ` +
        'If a middleware is built inside a request handler, build it once, with the app, and use that one for every request.',
      'RATEWINDOW_SUPERSEDED_LIMITER',
    )
  } catch {
    // a warning listener that throws: nothing more can be done without risking the request
  }
}
