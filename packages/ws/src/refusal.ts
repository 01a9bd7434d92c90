/**
 * What a refused client gets, written once for every binding: the close reason (at most 123 bytes of UTF-8, as
 * RFC 6455 allows in a close frame), the default error message of a dropped one, and an HTTP refusal written on
 * the raw socket of an upgrade (where no response object exists).
 */
import type { ClosableSocket } from '@ratewindow/core/adapter'
import type { MessageRefusal, RefusalReason } from './options.js'

/** The longest close reason a close frame carries: 125 bytes of payload, 2 of them the code. */
export const MAX_CLOSE_REASON_BYTES = 123

const encoder = new TextEncoder()

/**
 * `reason` cut to at most `maxBytes` bytes of UTF-8, on a character boundary: never half a character, and never
 * half of a surrogate pair.
 */
export function truncateUtf8(reason: string, maxBytes = MAX_CLOSE_REASON_BYTES): string {
  if (reason.length <= maxBytes / 3 || encoder.encode(reason).length <= maxBytes) return reason
  let bytes = 0
  let end = 0
  for (const character of reason) {
    const size = encoder.encode(character).length
    if (bytes + size > maxBytes) break
    bytes += size
    end += character.length
  }
  return reason.slice(0, end)
}

/** The close reason of a refusal, from the `closeReason` option, cut to 123 bytes. */
export function closeReasonOf(
  closeReason: string | ((refusal: MessageRefusal) => string),
  refusal: MessageRefusal,
): string {
  const reason = typeof closeReason === 'function' ? closeReason(refusal) : closeReason
  return truncateUtf8(typeof reason === 'string' ? reason : String(reason))
}

/**
 * A refusal with its wait in both units: `retryAfter` in seconds, rounded up as HTTP's `Retry-After` (a client
 * that waits the advertised seconds is never early), and `retryAfterMs`.
 */
export function messageRefusal(reason: RefusalReason, retryAfterMs: number): MessageRefusal {
  return { reason, retryAfter: Math.ceil(retryAfterMs / 1000), retryAfterMs }
}

/**
 * The error a dropped message answers by default: `{ error: 'rate_limited', reason, retryAfter, retryAfterMs }`
 * (`retryAfter` in seconds, as everywhere else in ratewindow).
 */
export function refusalMessage(refusal: MessageRefusal): { error: 'rate_limited' } & MessageRefusal {
  const { reason, retryAfter, retryAfterMs } = refusal
  return { error: 'rate_limited', reason, retryAfter, retryAfterMs }
}

/** An upgrade refused in HTTP terms: what the HTTP adapters would send. */
export interface UpgradeRefusal {
  statusCode: number
  /** The RateLimit headers and `Retry-After`, as the HTTP adapters send them. */
  headers: Record<string, string>
  contentType: string
  body: string
}

/** The part of a Node socket an upgrade refusal is written on (and whose close gives a slot back). */
export interface RawSocket extends ClosableSocket {
  on(event: 'error', listener: (error: Error) => void): unknown
  end(data: string): unknown
}

const REASONS: Record<number, string> = {
  400: 'Bad Request',
  403: 'Forbidden',
  429: 'Too Many Requests',
  500: 'Internal Server Error',
  503: 'Service Unavailable',
}

/**
 * Writes `refusal` as an HTTP/1.1 response on the socket of an upgrade request and ends it. The socket keeps an
 * error listener from here on: Node removed its own before the upgrade, and a server library that writes to it
 * again after this (`@hono/node-ws` answers the status once more) must not crash the process.
 */
export function writeRefusal(socket: RawSocket, refusal: UpgradeRefusal): void {
  socket.on('error', () => {})
  if (socket.destroyed === true) return
  const { statusCode, headers, contentType, body } = refusal
  const lines = [
    `HTTP/1.1 ${statusCode} ${REASONS[statusCode] ?? ''}`.trimEnd(),
    'Connection: close',
    `Content-Type: ${contentType}`,
    `Content-Length: ${encoder.encode(body).length}`,
  ]
  for (const name in headers) lines.push(`${name}: ${headers[name]}`)
  socket.end(`${lines.join('\r\n')}\r\n\r\n${body}`)
}
