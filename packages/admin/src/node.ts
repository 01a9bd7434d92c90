/**
 * Node's `IncomingMessage`/`ServerResponse` to the Web `Request`/`Response` of `adminHandler`, for the mounts on
 * Node frameworks (Express, Koa, Fastify, NestJS). No framework imported here.
 */
import type { IncomingMessage, ServerResponse } from 'node:http'
import { Readable } from 'node:stream'

/**
 * The Web request of a Node one. `url` is the path and query as the client sent them (before a framework's mount
 * stripped a prefix). `parsed`, when a body parser already read the stream (`express.json()`, Nest's, koa-bodyparser),
 * is sent again as JSON; else the body streams from `request` (or from `stream`, a framework's copy of it).
 */
export function webRequest(
  request: IncomingMessage,
  url: string,
  parsed?: unknown,
  stream: NodeJS.ReadableStream = request,
): Request {
  const headers = new Headers()
  for (const [name, value] of Object.entries(request.headers)) {
    if (name.startsWith(':') || value === undefined) continue
    headers.set(name, Array.isArray(value) ? value.join(', ') : value)
  }
  const method = request.method ?? 'GET'
  const init: RequestInit & { duplex?: 'half' } = { method, headers }
  if (method !== 'GET' && method !== 'HEAD') {
    if (parsed !== undefined) {
      init.body = jsonText(parsed)
      headers.delete('content-length')
    } else if (!request.readableEnded) {
      init.body = Readable.toWeb(stream as Readable) as ReadableStream<Uint8Array>
      init.duplex = 'half'
    }
  }
  return new Request(new URL(url, 'http://localhost'), init)
}

/**
 * A parsed body as JSON text again. One the parser accepted but that cannot be written back (nested deeper than the
 * stack: JSON.stringify overflows) becomes text that is not JSON, so that the handler answers it as it answers any
 * bad body, 400, after its own limit and `authorize` (not a 500 before them).
 */
function jsonText(parsed: unknown): string {
  if (typeof parsed === 'string') return parsed
  try {
    return JSON.stringify(parsed)
  } catch {
    return '{ (a body the framework parsed that could not be written back as JSON) }'
  }
}

/** Writes the handler's answer (a small JSON text) to a Node response. */
export async function sendResponse(response: Response, reply: ServerResponse): Promise<void> {
  const text = await response.text()
  reply.statusCode = response.status
  for (const [name, value] of response.headers) reply.setHeader(name, value)
  reply.end(text)
}

/** Whether a framework's body parser already read this request (`request.body` set, the stream consumed). */
export function parsedBody(request: IncomingMessage, body: unknown): unknown {
  return request.readableEnded && body !== undefined ? body : undefined
}
