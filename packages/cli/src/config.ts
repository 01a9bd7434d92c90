/**
 * `--config`: the application's limiter definitions, made again on the CLI's RedisStore so that every action goes
 * through `RateLimiter`'s own API (same namespace, same override scope, same semantics by construction).
 *
 * The module (ESM or CommonJS) exports `limiters` (named, or on its default export, or as its default export):
 * an array of options, one per limiter, each either `RateLimiter` options (with `rules`) or a middleware's
 * HTTP-style options (`limit`, `window`, `algorithm`…, read by core's `rateLimiterOptionsFrom`). Their `store` is
 * replaced by the CLI's; `name`, `prefix`, `group` and `overrides` must be the application's.
 *
 * A limiter made from HTTP-style options without a `key` function is keyed by the client's IP, as the HTTP engine
 * keys it (`ipKey`: IPv6 masked to `ipv6Subnet`, an IPv4 carried in IPv6 as that IPv4): `keyFor` turns an address
 * given on the command line into that key.
 */
import { resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import {
  type HttpRateLimitOptions,
  ipKey,
  RateLimiter,
  type RateLimiterOptions,
  type RedisStore,
} from '@ratewindow/core'
import { rateLimiterOptionsFrom } from '@ratewindow/core/adapter'
import { CliError, notFound, usage } from './errors.js'

/** One entry of a config's `limiters`. */
export type LimiterDefinition =
  | Omit<RateLimiterOptions, 'store'>
  | Omit<HttpRateLimitOptions<unknown>, 'store'>

/** What a config module exports (`export const limiters = [...]`, or `export default { limiters }`). */
export interface CliConfig {
  limiters: readonly LimiterDefinition[]
}

/**
 * The CLI's budget for one store call. The application's `timeout` (250 ms by default) is a request's budget; an
 * operator's command (a SCAN step of `overrides list` on a busy server) may take longer and must not fail for it.
 */
const STORE_TIMEOUT = '10s'

/**
 * Loads `path` and makes its limiters on `store`; a module still loading after `timeoutMs` (a top-level `await`
 * that never settles) is an error naming the file, not a silent wait.
 */
export async function loadLimiters(
  path: string,
  store: RedisStore,
  timeoutMs: number,
): Promise<RateLimiter[]> {
  let module: Record<string, unknown>
  try {
    module = (await loaded(import(pathToFileURL(resolve(path)).href), path, timeoutMs)) as Record<
      string,
      unknown
    >
  } catch (error) {
    if (error instanceof CliError) throw error
    throw new CliError(
      'ERR_RATEWINDOW_CONFIG',
      `\`--config\` ${path} could not be loaded: ${(error as Error).message}${(error as { code?: string }).code === 'ERR_UNKNOWN_FILE_EXTENSION' ? ". Node loads a TypeScript config through a loader (NODE_OPTIONS='--import tsx' ratewindow …), or write it as .mjs." : ''}`,
      {
        cause: error,
      },
    )
  }
  const definitions = definitionsOf(module)
  if (definitions === undefined) {
    throw new CliError(
      'ERR_RATEWINDOW_CONFIG',
      `\`--config\` ${path} exports no \`limiters\` array: export \`limiters\` (or a default export \`{ limiters }\`) listing the options of each limiter.`,
    )
  }
  const limiters = definitions.map((definition, i) => {
    if (typeof definition !== 'object' || definition === null || Array.isArray(definition)) {
      throw new CliError(
        'ERR_RATEWINDOW_CONFIG',
        `\`--config\` ${path}: \`limiters[${i}]\` is ${definition === null ? 'null' : typeof definition}, not a limiter's options object.`,
      )
    }
    try {
      definition = withoutAdapterOptions(definition)
      const http = isHttpStyle(definition)
      const options = http
        ? rateLimiterOptionsFrom(
            { ...(definition as HttpRateLimitOptions<unknown>), store },
            `limiters[${i}]`,
          )
        : { ...(definition as RateLimiterOptions), store }
      const limiter = new RateLimiter({ ...options, store, observer: undefined, timeout: STORE_TIMEOUT })
      const { key, ipv6Subnet } = definition as HttpRateLimitOptions<unknown>
      if (http && key === undefined) IP_KEYED.set(limiter, { ipv6Subnet })
      return limiter
    } catch (error) {
      throw new CliError(
        'ERR_RATEWINDOW_CONFIG',
        `\`--config\` ${path}: \`limiters[${i}]\` is not a limiter's options: ${(error as Error).message}`,
        { cause: error },
      )
    }
  })
  const repeated = limiters
    .map((limiter) => limiter.name)
    .filter((name, i, names) => names.indexOf(name) !== i)
  if (repeated.length > 0) {
    for (const limiter of limiters) limiter.release()
    throw new CliError(
      'ERR_RATEWINDOW_CONFIG',
      `\`--config\` ${path}: two limiters are named ${[...new Set(repeated)].map((name) => JSON.stringify(name)).join(', ')}; give each its own \`name\` (\`--limiter\` chooses by name).`,
    )
  }
  return limiters
}

/**
 * `loading`, or a CliError once `timeoutMs` has passed without it. NOTE: the import goes on (a module cannot be
 * unloaded); the CLI ends with the error, whatever the module still holds open (bin.ts exits).
 */
function loaded<T>(loading: Promise<T>, path: string, timeoutMs: number): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      const seconds = timeoutMs / 1000
      reject(
        new CliError(
          'ERR_RATEWINDOW_CONFIG',
          `\`--config\` ${path} did not finish loading within ${seconds} s: its top-level code is still waiting (an \`await\` that never settles, such as a connection the module opens and waits for). Export the limiters' options without waiting for anything, or give it longer with --config-timeout (or RATEWINDOW_CONFIG_TIMEOUT), e.g. --config-timeout 30s.`,
        ),
      )
    }, timeoutMs)
  })
  return Promise.race([loading, late]).finally(() => clearTimeout(timer))
}

/**
 * The options of one adapter that say how a request reaches the limiter or how a refusal is answered, never what
 * is counted (Fastify's `hook`, `global`, `notFound`; a `handler`; Hono's and Next.js's address options): an
 * application's own options, as its middleware takes them, are a config with them left out.
 */
const ADAPTER_OPTIONS = ['hook', 'global', 'notFound', 'handler', 'getConnInfo', 'clientIp', 'trustProxy']

function withoutAdapterOptions(definition: object): object {
  if (!ADAPTER_OPTIONS.some((name) => Object.hasOwn(definition, name))) return definition
  const options: Record<string, unknown> = { ...definition }
  for (const name of ADAPTER_OPTIONS) delete options[name]
  return options
}

/**
 * Whether `definition` is a middleware's HTTP-style options: no fixed `rules` (it has `limit`/`window`), or an
 * HTTP-only option (`key`, `ipv6Subnet`). Fixed `rules` alone are read as `RateLimiter` options.
 */
function isHttpStyle(definition: object): boolean {
  const rules = (definition as { rules?: unknown }).rules
  return (
    rules === undefined || typeof rules === 'function' || 'key' in definition || 'ipv6Subnet' in definition
  )
}

/** The limiters keyed by the client's IP (made from HTTP-style options without `key`), with their `ipv6Subnet`. */
const IP_KEYED = new WeakMap<RateLimiter, { ipv6Subnet: number | false | undefined }>()

/**
 * The key `limiter` receives for `given`: for a limiter keyed by the client's IP, an address given becomes the key
 * the HTTP engine makes of it (core's `ipKey`), with a note saying so; any other key as it is.
 */
export function keyFor(
  limiter: RateLimiter,
  given: string,
): { key: string; note?: string; warning?: string } {
  const ip = IP_KEYED.get(limiter)
  const masked = keyOfAddress(given, ip?.ipv6Subnet)
  if (masked === undefined || masked === given) return { key: given }
  const subnet = /\/(\d+)$/.exec(masked)
  if (ip === undefined)
    return {
      key: given,
      warning: `${limiter.name} is read as RateLimiter options (fixed \`rules\`, no \`ipv6Subnet\`): the key is ${given} as given. If the application's middleware keys it by the client's IP, its key is ${masked}: add \`ipv6Subnet\` to its config entry.`,
    }
  const how =
    subnet !== null
      ? `the /${subnet[1]} of the address given`
      : masked.includes(':') || masked === given.trim()
        ? 'the address given, as the HTTP engine keys it'
        : 'the IPv4 address the address given carries'
  return { key: masked, note: `key: ${masked} (${how})` }
}

/** The key the HTTP engine makes of `given` (core's `ipKey`), or undefined when it is not an address. */
function keyOfAddress(given: string, ipv6Subnet: number | false | undefined): string | undefined {
  try {
    return ipKey(given, { ipv6Subnet })
  } catch {
    return undefined // not an address: a key as the limiter stores it (a subnet such as 2001:db8::/56)
  }
}

function definitionsOf(module: Record<string, unknown>): LimiterDefinition[] | undefined {
  const fallback = module.default as Record<string, unknown> | unknown[] | undefined
  for (const candidate of [module.limiters, Array.isArray(fallback) ? fallback : fallback?.limiters]) {
    if (Array.isArray(candidate)) return candidate as LimiterDefinition[]
  }
  return undefined
}

/**
 * The limiters `--limiter` names (by `name` or namespace); without it, the only one, or every one when `all`.
 * Unknown name: exit code 3.
 */
export function selectLimiters(
  limiters: readonly RateLimiter[],
  wanted: string | undefined,
  all: boolean,
): RateLimiter[] {
  if (wanted !== undefined) {
    const found = limiters.filter((limiter) => limiter.name === wanted || limiter.namespace === wanted)
    if (found.length === 0)
      throw notFound(
        `No limiter ${JSON.stringify(wanted)} in the config; it has ${limiters.map((limiter) => limiter.name).join(', ')}.`,
      )
    return found
  }
  if (all || limiters.length === 1) return [...limiters]
  throw usage(
    `The config has ${limiters.length} limiters: choose one with \`--limiter\` (${limiters.map((limiter) => limiter.name).join(', ')}).`,
  )
}
