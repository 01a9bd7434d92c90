/**
 * The warning for two limiters that answer one request with RateLimit fields of different shapes (draft-6's
 * `RateLimit-Limit`, `-Remaining`, `-Reset` beside a later draft's `RateLimit` list, or `X-RateLimit-*` from one
 * of them only): each writes its own fields and overwrites only the ones they share, so the response states two
 * quotas that contradict each other. Checked per request only while engines of two shapes exist in the process:
 * with one shape, nothing can mix and nothing is done.
 */
import { emitWarning } from '../support/runtime.js'
import type { HeaderFormat } from './headers.js'

/** The fields an engine writes: which of the two field sets (draft-6's or the later drafts'), and legacy ones. */
export interface HeaderFields {
  /** What the warning names: `headers: 'draft-6'`, `headers: 'draft-8', legacyHeaders: true`, … */
  readonly label: string
  /** Engines of the same shape write the same field names: the later one's fields replace the earlier's. */
  readonly shape: string
}

/** Engines made so far, by shape: the check runs only once there are two shapes. */
const shapes = new Map<string, number>()
/** The fields last written for each request (its object: Express's `req`, Koa's `ctx`, Hono's `c`, …). */
const written = new WeakMap<object, { fields: HeaderFields; owner: string }>()
let warned = false

/** The fields of an engine with these options, registered; undefined for `headers: false`. */
export function headerFields(format: HeaderFormat | false, legacy: boolean): HeaderFields | undefined {
  if (format === false) return undefined
  const shape = `${format === 'draft-6' ? 'draft-6' : 'structured'}${legacy ? '+legacy' : ''}`
  shapes.set(shape, (shapes.get(shape) ?? 0) + 1)
  const label = `headers: '${format}'${legacy ? ', legacyHeaders: true' : ''}`
  return { label, shape }
}

/** Whether two shapes are in use in this process: only then is a request's mix worth checking. */
export function shapesMayMix(): boolean {
  return shapes.size > 1
}

/**
 * Notes that `fields` of the limiter `owner` answer `request`; warns once per process when another limiter's
 * fields of another shape answered it before (`RATEWINDOW_MIXED_HEADERS`).
 */
export function noteHeaderFields(request: unknown, fields: HeaderFields, owner: string): void {
  if (typeof request !== 'object' || request === null) return
  const before = written.get(request)
  written.set(request, { fields, owner })
  if (warned || before === undefined || before.fields.shape === fields.shape) return
  warned = true
  emitWarning(
    `Two limiters answered one request with RateLimit fields of different formats: '${before.owner}' ` +
      `(${before.fields.label}) and '${owner}' (${fields.label}). Each writes its own fields, so the response ` +
      'states two quotas that contradict each other. Give the limiters that meet on a route the same `headers` ' +
      'and `legacyHeaders`, or `headers: false` on all but one (docs/headers.md).',
    'RATEWINDOW_MIXED_HEADERS',
  )
}
