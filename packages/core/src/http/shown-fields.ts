/**
 * Whose RateLimit fields answer a request that several limiters limit (one per IP app-wide, one per user on a
 * route; two Fastify registrations): the refusing limiter's on a denial, otherwise those of the limiter with the
 * fewest requests left, as one limiter reports the most restrictive of its rules. The limiters decide in turn; each
 * writes its fields only when they are the ones to show, and then removes those of the limiter before it that it
 * does not write itself (another format, `X-RateLimit-*`), so that an answer never states a quota beside another
 * that contradicts it. Before, on Express and Koa the last limiter's fields stood: a client was told 9, 8, 7 left by
 * a route's limit of 10, then refused by the app-wide limit of 3.
 */
import type { HttpDecision } from './decision.js'

/** The fields written on a request's answer so far, and the requests they leave (-1 for a denial's). */
const SHOWN = Symbol('ratewindow.shown')

interface Shown {
  remaining: number
  names: readonly string[]
}

/** How an adapter writes and removes the fields of its response object (one writer per adapter, made once). */
export interface FieldWriter<T> {
  set(target: T, name: string, value: string): void
  remove(target: T, name: string): void
}

/**
 * Writes the fields of `decision` on `target` through `writer` when they are the ones to show; whether they were
 * written (an adapter follows a settle's rewrite only of fields it wrote). `holder` is an object of the request's
 * own that every limiter on it sees (the request, the response, Koa's context), where the fields shown so far are
 * kept.
 */
export function showFields<T>(
  holder: object,
  decision: HttpDecision,
  writer: FieldWriter<T>,
  target: T,
): boolean {
  const written = holder as { [SHOWN]?: Shown }
  const before = written[SHOWN]
  const { headers, result } = decision
  const names = Object.keys(headers)
  // An answer without fields (shadow mode, the failure policy letting it through, `headers: false`) leaves the
  // fields before it; an admitted one with more requests left than they state too.
  if (result.allowed && (names.length === 0 || (before !== undefined && before.remaining < result.remaining)))
    return false
  if (before !== undefined)
    for (const name of before.names) if (!(name in headers)) writer.remove(target, name)
  for (const name of names) writer.set(target, name, headers[name]!)
  written[SHOWN] = { remaining: result.allowed ? result.remaining : -1, names }
  return true
}
