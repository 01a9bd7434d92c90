import { RateLimitError } from './errors.js'

/**
 * The names of an options type, checked by the compiler both ways: a field added to the type and not listed
 * (or listed and not in the type) fails typecheck, so the runtime check cannot drift from the types.
 * @example const NAMES = namesOf<MemoryStoreOptions>({ clock: true, maxKeys: true, sweepInterval: true })
 */
export function namesOf<T>(names: Record<keyof Required<T>, true>): readonly string[] {
  return Object.freeze(Object.keys(names))
}

const ERL = 'express-rate-limit'
const FRL = '@fastify/rate-limit'
const KRL = 'koa-ratelimit'
const ESD = 'express-slow-down'
/** What express-slow-down's names map to: the adapter's `slowDown()`, or a limiter that waits for its slot. */
const SLOW_DOWN_HINT =
  "your adapter's `slowDown({ delayAfter, delayMs, maxDelayMs })` in place of `rateLimit()`: it counts every request and delays those after `delayAfter`, refusing none for its count (docs/slow-down.md); to make a request over the limit wait for its slot rather than be refused, `delay: { max }` on `rateLimit()`"

/**
 * Names users bring from express-rate-limit, @fastify/rate-limit and koa-ratelimit, with ours. Only names
 * that ours do not already share (`limit`, `store`, `skip`, `message`, `statusCode`, `handler`, …).
 */
const PEER_NAMES = {
  max: { from: `${ERL}, ${FRL} and ${KRL}`, use: '`limit: 100`' },
  windowMs: { from: ERL, use: "`window`: milliseconds or a string such as '15m' or '15 minutes'" },
  timeWindow: { from: FRL, use: "`window`: milliseconds or a string such as '1m' or '1 minute'" },
  duration: { from: KRL, use: "`window`: milliseconds or a string such as '1h'" },
  keyGenerator: { from: `${ERL} and ${FRL}`, use: '`key: (request) => string`' },
  id: { from: KRL, use: '`key: (ctx) => string`' },
  standardHeaders: { from: ERL, use: "`headers: 'draft-6' | 'draft-7' | 'draft-8' | 'draft-11' | false`" },
  enableDraftSpec: { from: FRL, use: "`headers: 'draft-6' | 'draft-7' | 'draft-8' | 'draft-11' | false`" },
  draft_polli_ratelimit_headers: { from: ERL, use: "`headers: 'draft-6'`" },
  addHeaders: { from: FRL, use: '`headers` (a format or `false`) and `legacyHeaders`' },
  addHeadersOnExceeding: { from: FRL, use: '`headers` (a format or `false`) and `legacyHeaders`' },
  disableHeader: { from: KRL, use: '`headers: false`' },
  whitelist: {
    from: KRL,
    use: "`allowList: { ips: ['10.0.0.0/8'], keys: [...] }`, or for a function `skip: (ctx) => boolean`",
  },
  allowlist: {
    from: KRL,
    use: "`allowList: { ips: ['10.0.0.0/8'], keys: [...] }`, or for a function `skip: (ctx) => boolean`",
  },
  blacklist: {
    from: KRL,
    use: "`denyList: { ips: ['198.51.100.0/24'], keys: [...] }`, or for a function `denyList: (ctx) => boolean` (true refuses)",
  },
  blocklist: {
    from: KRL,
    use: "`denyList: { ips: ['198.51.100.0/24'], keys: [...] }`, or for a function `denyList: (ctx) => boolean` (true refuses)",
  },
  ban: { from: FRL, use: '`penalty: { after, within, block }` (blocks a key denied repeatedly)' },
  errorResponseBuilder: { from: FRL, use: '`message: (request, result) => body` or `handler`' },
  errorMessage: { from: KRL, use: '`message`' },
  throw: {
    from: KRL,
    // Koa's error handling drops the headers set before a throw (RateLimit-*, Retry-After) unless passed with it.
    use: "`handler: (ctx) => ctx.throw(429, 'Too many requests', { headers: ctx.response.headers })`",
  },
  onLimitReached: { from: ERL, use: '`handler` (called for each denied request)' },
  onExceeded: { from: FRL, use: '`handler` (called for each denied request)' },
  onExceeding: { from: FRL, use: '`handler` (denied requests) or read `request.rateLimit`' },
  onBanReach: { from: FRL, use: '`handler`' },
  onLimited: { from: KRL, use: '`handler` (called for each denied request)' },
  db: { from: KRL, use: '`store: new RedisStore({ client })` or `store: new MemoryStore()`' },
  driver: { from: KRL, use: '`store: new RedisStore({ client })` or `store: new MemoryStore()`' },
  redis: { from: FRL, use: '`store: new RedisStore({ client: redis })`' },
  cache: { from: FRL, use: '`store: new MemoryStore({ maxKeys })`' },
  skipOnError: { from: FRL, use: "`onStoreError: 'allow'` (the default; 'deny' fails closed)" },
  passOnStoreError: { from: ERL, use: "`onStoreError: 'allow'` (the default; 'deny' fails closed)" },
  groupId: { from: FRL, use: "`group: 'name'` (one budget shared by every limiter of the group)" },
  nameSpace: { from: FRL, use: '`prefix`' },
  keyPrefix: { from: 'rate-limiter-flexible', use: '`prefix`' },
  identifier: {
    from: ERL,
    use: "`rules: [slidingWindowCounter({ limit, window, name: 'api' })]` (the `name`)",
  },
  requestPropertyName: {
    from: ERL,
    use: 'the result, always at `req.rateLimit` / `ctx.state.rateLimit` / `request.rateLimit`',
  },
  validate: { from: ERL, use: 'nothing: ratewindow always validates its options at construction' },
  continueExceeding: { from: FRL, use: 'nothing: a denied request is never counted' },
  exponentialBackoff: { from: FRL, use: 'nothing (no backoff); see `rules` to combine windows' },
  logLevel: { from: FRL, use: '`onError` (receives every store failure)' },
  delayMs: { from: ESD, use: SLOW_DOWN_HINT },
  delayAfter: { from: ESD, use: SLOW_DOWN_HINT },
  maxDelayMs: { from: ESD, use: SLOW_DOWN_HINT },
} as const satisfies Readonly<Record<string, { from: string; use: string }>>

/**
 * The option names of express-rate-limit, @fastify/rate-limit and koa-ratelimit that ratewindow refuses (with the
 * name to use): typed as `never` where the compiler cannot refuse unknown names otherwise (Fastify's route
 * `config.ratewindow`, whose type Fastify widens by the literal it is given).
 */
export type PeerOptionName = keyof typeof PEER_NAMES

/** Names of one adapter that another adapter's users may try: the adapter, and what to use elsewhere. */
const HONO_ADDRESS =
  "Here the client address is the framework's own (`req.ip`, `ctx.ip`, `request.ip`); a `key` or `keyGenerator` function keys by something else."
const ADAPTER_ONLY: Readonly<Record<string, { of: string; instead?: string }>> = {
  global: { of: '@ratewindow/fastify (plugin option)' },
  hook: { of: '@ratewindow/fastify' },
  trustProxy: {
    of: '@ratewindow/hono and @ratewindow/next',
    instead:
      "Here set the framework's own: Express `app.set('trust proxy', 1)`, Koa `app.proxy = true`, Fastify `Fastify({ trustProxy: 1 })`.",
  },
  getConnInfo: { of: '@ratewindow/hono', instead: HONO_ADDRESS },
  clientIp: {
    of: '@ratewindow/hono, @ratewindow/next, @ratewindow/trpc and @ratewindow/graphql',
    instead: HONO_ADDRESS,
  },
}

/**
 * Throws `ERR_RATEWINDOW_UNKNOWN_OPTION` for the own properties of `options` not in `known`: all of them in one
 * error (a ported configuration is fixed in one round), each named with, for a peer library's name, the
 * option to use instead. `option` is the first of them. `where` names the options object, e.g. `'rateLimit()'`
 * or `'MemoryStore'`.
 */
export function rejectUnknownOptions(options: unknown, known: readonly string[], where: string): void {
  if (typeof options !== 'object' || options === null) return
  const unknown = Object.keys(options).filter((name) => !known.includes(name))
  if (unknown.length === 0) return
  const message =
    unknown.length === 1
      ? unknownMessage(unknown[0]!, known, where)
      : `${unknown.length} unknown options in ${where} options:\n${unknown
          .map((name) => `- ${unknownItem(name, known)}`)
          .join('\n')}\nKnown options: ${known.join(', ')}.`
  throw new RateLimitError('ERR_RATEWINDOW_UNKNOWN_OPTION', message, { option: unknown[0] })
}

const shownName = (name: string) => (name.length > 40 ? `${name.slice(0, 40)}…` : name)

function unknownMessage(name: string, known: readonly string[], where: string): string {
  const head = `Unknown option \`${shownName(name)}\` in ${where} options`
  const hint = hintFor(name, known)
  if (hint !== undefined && !hint.startsWith('Did you mean')) return `${head}: ${hint}`
  return `${head}.${hint === undefined ? '' : ` ${hint}`} Known options: ${known.join(', ')}.`
}

/** One line of the several-names message. */
function unknownItem(name: string, known: readonly string[]): string {
  const hint = hintFor(name, known)
  return `\`${shownName(name)}\`${hint === undefined ? '' : `: ${hint}`}`
}

/** What to write instead of `name`: a peer's name, another adapter's option, or a close known name. */
function hintFor(name: string, known: readonly string[]): string | undefined {
  const peer = Object.hasOwn(PEER_NAMES, name) ? PEER_NAMES[name as PeerOptionName] : undefined
  if (peer !== undefined) return `\`${name}\` is ${peer.from}'s name. With ratewindow use ${peer.use}.`
  const adapter = Object.hasOwn(ADAPTER_ONLY, name) ? ADAPTER_ONLY[name] : undefined
  if (adapter !== undefined)
    return `\`${name}\` is an option of ${adapter.of} only.${adapter.instead === undefined ? '' : ` ${adapter.instead}`}`
  const close = known.find((candidate) => editDistance(candidate.toLowerCase(), name.toLowerCase()) <= 2)
  return close === undefined ? undefined : `Did you mean \`${close}\`?`
}

/** Levenshtein distance, for "did you mean" on short option names. */
function editDistance(a: string, b: string): number {
  if (Math.abs(a.length - b.length) > 2 || a.length > 40 || b.length > 40) return 3
  let previous = Array.from({ length: b.length + 1 }, (_, i) => i)
  for (let i = 1; i <= a.length; i++) {
    const current = [i]
    for (let j = 1; j <= b.length; j++) {
      const substitution = previous[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1)
      current[j] = Math.min(previous[j]! + 1, current[j - 1]! + 1, substitution)
    }
    previous = current
  }
  return previous[b.length]!
}
