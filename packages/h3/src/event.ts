/**
 * What the adapter reads of an h3 event, in h3 2 and in h3 1 (Nitro 2, Nuxt 3 and 4): both are served by one
 * middleware, so the event is read by its shape, never through one major's imports.
 */
import type { ClosableSocket, Defer, TrackedResponse } from '@ratewindow/core/adapter'

/** The Node request under an event (h3 1's `event.node.req`, h3 2's on Node): its socket and headers. */
interface NodeRequestLike {
  socket?: (Partial<ClosableSocket> & { remoteAddress?: string }) | null
}

/** The parts of an h3 event (1 or 2) the adapter reads. */
export interface H3EventLike {
  /** Both: the event's context (`clientAddress` where a platform sets it, as h3's `getRequestIP` reads it). */
  context: { clientAddress?: unknown }
  /** Both (h3 1 from 1.8): the request headers. */
  headers: { get(name: string): string | null }
  /** h3 2: the Web request, `ip` from the server (srvx), its abort signal, its method. */
  req?: { ip?: string; signal?: AbortSignal; headers?: unknown; method?: string }
  /** h3 2: the prepared response (status, headers); h3 1's deprecated `res` is Node's response. */
  res?: unknown
  /** h3 1, and h3 2 on Node: the Node request and response. */
  node?: { req?: NodeRequestLike; res?: unknown }
  /** Both (where the runtime has one): work after the response. */
  waitUntil?: (work: Promise<unknown>) => void
}

/**
 * Whether `event` is an h3 2 event: its `req` is a Web request (headers with `get`). h3 1's deprecated `req` is
 * Node's request, whose headers are a plain object.
 */
export const isWebEvent = (event: H3EventLike): boolean =>
  typeof (event.req?.headers as { get?: unknown } | undefined)?.get === 'function'

/**
 * The connection's address, as h3's `getRequestIP(event)` reads it without `xForwardedFor`: the platform's
 * `context.clientAddress`, else the server's (h3 2: `req.ip`; h3 1: the Node socket's peer). Never a header.
 */
export function connectionAddress(event: H3EventLike): string | undefined {
  const platform = event.context.clientAddress
  if (typeof platform === 'string' && platform !== '') return platform
  if (isWebEvent(event)) return event.req?.ip || undefined
  return event.node?.req?.socket?.remoteAddress || undefined
}

/** The Node socket under the event (h3 1; h3 2 on Node); undefined elsewhere. */
export function nodeSocketOf(event: H3EventLike): ClosableSocket | undefined {
  const socket = event.node?.req?.socket
  return typeof socket?.once === 'function' ? (socket as ClosableSocket) : undefined
}

/** h3 1's Node response, which the engine can watch as it is (`statusCode`, `finish`, `close`). */
export function nodeResponseOf(event: H3EventLike): (TrackedResponse & NodeResponseLike) | undefined {
  const response = event.node?.res as Partial<TrackedResponse & NodeResponseLike> | undefined
  return typeof response?.once === 'function' && typeof response.setHeader === 'function'
    ? (response as TrackedResponse & NodeResponseLike)
    : undefined
}

interface NodeResponseLike {
  readonly headersSent: boolean
  setHeader(name: string, value: string): unknown
}

/** Sets `headers` on the response being prepared (h3 2: `event.res.headers`; h3 1: the Node response). */
export function setResponseHeaders(event: H3EventLike, headers: Record<string, string>): void {
  if (isWebEvent(event)) {
    const prepared = (event.res as { headers: { set(name: string, value: string): void } }).headers
    for (const name in headers) prepared.set(name, headers[name]!)
    return
  }
  const response = nodeResponseOf(event)
  if (response === undefined || response.headersSent) return
  for (const name in headers) response.setHeader(name, headers[name]!)
}

/** `event.waitUntil` where the runtime gives one (Workers, Vercel): work after the response is kept alive. */
export function deferOf(event: H3EventLike): Defer | undefined {
  return typeof event.waitUntil === 'function' ? (work) => event.waitUntil!(work) : undefined
}
