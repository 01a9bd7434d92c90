/**
 * `watch`: a table refreshed every second on a terminal: the top keys from a scan, and, with `--admin URL` (one
 * per process), each process's decisions and most refused keys from its admin endpoint's `GET /stats`. Nothing
 * here adds work to the decision path: the scan reads Redis, the counts come from each process's own sketch.
 */
import type { AdminStatsView } from '@ratewindow/admin'
import type { RateLimiter } from '@ratewindow/core'
import type { GlobalOptions } from '../args.js'
import { CliError } from '../errors.js'
import type { Connection } from '../redis.js'
import { type Output, printable, table } from '../render.js'
import { type TopJson, top, topText } from './scanned.js'

/** @deprecated `AdminStatsView` of @ratewindow/admin, the endpoint's `GET /stats`; this name stays until 1.0. */
export type AdminStats = AdminStatsView

/** `watch --json`: one frame (`--once`), or one line per frame. */
export interface WatchJson {
  at: number
  top: TopJson
  admin: ({ url: string; stats: AdminStatsView } | { url: string; error: string })[]
}

export interface WatchOptions {
  once: boolean
  admin: readonly string[]
  adminToken: string | undefined
}

/** The refresh period on a terminal. */
const PERIOD_MS = 1000

export async function watch(
  connection: Connection,
  options: GlobalOptions,
  watchOptions: WatchOptions,
  configured: readonly RateLimiter[],
  output: Output,
  signal: AbortSignal | undefined,
): Promise<WatchJson> {
  for (;;) {
    const frame = await frameOf(connection, options, watchOptions, configured, output)
    if (options.json) output.print(JSON.stringify(frame, null, watchOptions.once ? 2 : undefined))
    // A new frame clears the screen on a terminal only: piped to a file, frames follow one another.
    else output.print(`${watchOptions.once || !output.screen ? '' : '\u001b[2J\u001b[H'}${frameText(frame)}`)
    if (watchOptions.once) {
      const failed = frame.admin.find((each) => 'error' in each)
      if (failed !== undefined)
        throw new CliError('ERR_RATEWINDOW_ADMIN', `${failed.url}: ${(failed as { error: string }).error}`, {
          printed: true,
        })
      return frame
    }
    if (await stopped(signal, PERIOD_MS)) return frame
  }
}

async function frameOf(
  connection: Connection,
  options: GlobalOptions,
  watchOptions: WatchOptions,
  configured: readonly RateLimiter[],
  output: Output,
): Promise<WatchJson> {
  const [keys, admin] = await Promise.all([
    top(connection, { ...options, json: true }, configured, output, true),
    Promise.all(watchOptions.admin.map((url) => statsOf(url, watchOptions.adminToken))),
  ])
  return { at: Date.now(), top: keys, admin }
}

async function statsOf(url: string, token: string | undefined): Promise<WatchJson['admin'][number]> {
  const base = url.replace(/\/+$/, '')
  try {
    const response = await fetch(`${base}/stats`, {
      headers: {
        accept: 'application/json',
        ...(token !== undefined && { authorization: `Bearer ${token}` }),
      },
      signal: AbortSignal.timeout(5000),
    })
    const body = (await response.json().catch(() => undefined)) as
      | (AdminStatsView & { error?: { message?: string } })
      | undefined
    if (!response.ok || body === undefined)
      return { url, error: `HTTP ${response.status}${body?.error?.message ? `: ${body.error.message}` : ''}` }
    return { url, stats: body }
  } catch (error) {
    return { url, error: (error as Error).message }
  }
}

function frameText(frame: WatchJson): string {
  const parts = [`ratewindow watch — ${new Date(frame.at).toISOString()}`, '', topText(frame.top)]
  for (const each of frame.admin) {
    parts.push('')
    if ('error' in each) {
      parts.push(printable(`${each.url}: ${each.error}`))
      continue
    }
    const { decisions, refused } = each.stats
    parts.push(
      printable(`${each.url} (since ${new Date(each.stats.since).toISOString()})`),
      table(
        ['LIMITER', 'ALLOWED', 'REFUSED'],
        Object.entries(decisions).map(([limiter, counts]) => [limiter, counts.allowed, counts.refused]),
      ),
    )
    if (refused.length > 0)
      parts.push(
        '',
        table(
          ['MOST REFUSED', 'LIMITER', 'COUNT'],
          refused.slice(0, 10).map((row) => [row.key, row.limiter, row.count]),
        ),
      )
  }
  return parts.join('\n')
}

/** Waits `ms`, or until `signal` aborts: true when it did. */
function stopped(signal: AbortSignal | undefined, ms: number): Promise<boolean> {
  if (signal?.aborted) return Promise.resolve(true)
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort)
      resolve(false)
    }, ms)
    const onAbort = () => {
      clearTimeout(timer)
      resolve(true)
    }
    signal?.addEventListener('abort', onAbort, { once: true })
  })
}
