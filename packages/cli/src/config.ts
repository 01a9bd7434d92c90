/**
 * `--config`: the application's limiter definitions, made again on the CLI's RedisStore so that every action goes
 * through `RateLimiter`'s own API (same namespace, same override scope, same semantics by construction).
 *
 * The module (ESM or CommonJS) exports `limiters` (named, or on its default export, or as its default export):
 * an array of options, one per limiter, each either `RateLimiter` options (with `rules`) or a middleware's
 * HTTP-style options (`limit`, `window`, `algorithm`…, read by core's `rateLimiterOptionsFrom`). Their `store` is
 * replaced by the CLI's; `name`, `prefix`, `group` and `overrides` must be the application's.
 */
import { resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import {
  type HttpRateLimitOptions,
  RateLimiter,
  type RateLimiterOptions,
  type RedisStore,
  rateLimiterOptionsFrom,
} from '@ratewindow/core'
import { CliError, notFound, usage } from './errors.js'

/** One entry of a config's `limiters`. */
export type LimiterDefinition =
  | Omit<RateLimiterOptions, 'store'>
  | Omit<HttpRateLimitOptions<unknown>, 'store'>

/** What a config module exports (`export const limiters = [...]`, or `export default { limiters }`). */
export interface CliConfig {
  limiters: readonly LimiterDefinition[]
}

/** Loads `path` and makes its limiters on `store`. */
export async function loadLimiters(path: string, store: RedisStore): Promise<RateLimiter[]> {
  let module: Record<string, unknown>
  try {
    module = (await import(pathToFileURL(resolve(path)).href)) as Record<string, unknown>
  } catch (error) {
    throw new CliError(
      'ERR_RATEWINDOW_CONFIG',
      `\`--config\` ${path} could not be loaded: ${(error as Error).message}`,
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
  return definitions.map((definition, i) => {
    try {
      const options =
        'rules' in definition && definition.rules !== undefined && typeof definition.rules !== 'function'
          ? { ...(definition as RateLimiterOptions), store }
          : rateLimiterOptionsFrom(
              { ...(definition as HttpRateLimitOptions<unknown>), store },
              `limiters[${i}]`,
            )
      return new RateLimiter({ ...options, store, observer: undefined })
    } catch (error) {
      throw new CliError(
        'ERR_RATEWINDOW_CONFIG',
        `\`--config\` ${path}: \`limiters[${i}]\` is not a limiter's options: ${(error as Error).message}`,
        { cause: error },
      )
    }
  })
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
