/**
 * Whose RateLimit fields answer a request that several registrations limit (one limit per IP, one per user): the
 * refusing limiter's on a denial, otherwise those of the limiter with the fewest requests left, as one limiter
 * reports the most restrictive of its rules. The limiters decide in turn; each writes its fields only when they are
 * the ones to show, and then removes those of the limiter before it that it does not write itself (another format,
 * `X-RateLimit-*`), so that an answer never states a quota beside another that contradicts it.
 */
import type { HttpDecision } from '@ratewindow/core/adapter'
import type { FastifyReply, FastifyRequest } from 'fastify'

/** The fields written on a request's reply so far, and the requests they leave (-1 for a denial's). */
const SHOWN = Symbol('ratewindow.shown')

interface Shown {
  remaining: number
  names: readonly string[]
}

/** Writes the fields of `decision` on `reply` when they are the ones to show; whether they were written. */
export function showFields(request: FastifyRequest, reply: FastifyReply, decision: HttpDecision): boolean {
  const written = request as FastifyRequest & { [SHOWN]?: Shown }
  const before = written[SHOWN]
  const { headers, result } = decision
  const names = Object.keys(headers)
  // An answer without fields (shadow mode, the failure policy letting it through, `headers: false`) leaves the
  // fields before it; an admitted one with more requests left than they state too.
  if (result.allowed && (names.length === 0 || (before !== undefined && before.remaining < result.remaining)))
    return false
  if (before !== undefined) for (const name of before.names) if (!(name in headers)) reply.removeHeader(name)
  reply.headers(headers)
  written[SHOWN] = { remaining: result.allowed ? result.remaining : -1, names }
  return true
}
