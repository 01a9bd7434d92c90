/**
 * What core's engine knows of a tRPC call: the client address (the Node request in the context, or `clientIp`),
 * the procedure's path as its route, and the response the adapter exposes in the context, where the RateLimit
 * headers go: the fetch adapter's `resHeaders` (a `Headers`), or the Node adapter's `res` (a `ServerResponse`).
 */
import { RateLimitError } from '@ratewindow/core'
import { type FrameworkBinding, forwardedClient, type TrustedHop } from '@ratewindow/core/adapter'
import type { TrpcCall } from './options.js'

/** The part of Node's `IncomingMessage` the default key reads. */
interface NodeRequest {
  socket: { remoteAddress?: string; destroyed?: boolean } | null
  headers: Record<string, string | string[] | undefined>
}

/** Where a call's headers are written: a setter, or none when the context exposes no response. */
type HeaderSetter = (name: string, value: string) => void

/**
 * The binding for `rateLimit()`: `address` finds the client address (`addressOf`); `keyed` says whether `key` is
 * given; `where` names the options in messages.
 */
export function trpcBinding<TContext, TMeta>(
  clientIp: ((call: TrpcCall<TContext, TMeta>) => string | undefined) | undefined,
  trusted: TrustedHop | undefined,
  keyed: boolean,
  where: string,
): FrameworkBinding<TrpcCall<TContext, TMeta>> {
  return {
    name: 'tRPC',
    clientIp: addressOf(clientIp, trusted, keyed, where),
    // A closed connection has no address left (the Node adapter), or its signal aborted: nothing to decide.
    gone: (call) => call.signal?.aborted === true || nodeRequestOf(call)?.socket?.destroyed === true,
    untrustedForwardedFor: (call) => {
      const request = nodeRequestOf(call)
      if (request === undefined || request.headers['x-forwarded-for'] === undefined) return undefined
      return clientIp === undefined && trusted === undefined
    },
    trustProxyHint: `pass \`trustProxy\` (your proxies: their number, or their addresses), \`clientIp\` or \`key\` to ${where}`,
    route: (call) => call.path,
    // After `ctx.rateLimit.settle(n)`: the headers follow, until the response is sent.
    writeHeaders: (call, headers) => writeHeaders(call as TrpcCall, headers),
  }
}

/** Sets `headers` on the response the call's context exposes, if any and while it is not sent. */
export function writeHeaders(call: TrpcCall, headers: Record<string, string>): void {
  const set = headerSetterOf(call.ctx)
  if (set !== undefined) for (const name in headers) set(name, headers[name]!)
}

/**
 * The response of the context: `resHeaders` (the fetch adapter's, and Next.js route handlers'), else `res` (the
 * Node adapters'), written only until its headers are sent.
 */
function headerSetterOf(ctx: unknown): HeaderSetter | undefined {
  if (typeof ctx !== 'object' || ctx === null) return undefined
  const { resHeaders, res } = ctx as { resHeaders?: unknown; res?: unknown }
  if (isHeaders(resHeaders)) return (name, value) => resHeaders.set(name, value)
  if (isNodeResponse(res)) return (name, value) => res.headersSent || res.setHeader(name, value)
  return undefined
}

const isHeaders = (value: unknown): value is { set(name: string, value: string): void } =>
  typeof value === 'object' &&
  value !== null &&
  typeof (value as Headers).set === 'function' &&
  typeof (value as Headers).get === 'function'

const isNodeResponse = (
  value: unknown,
): value is { headersSent: boolean; setHeader(n: string, v: string): unknown } =>
  typeof value === 'object' &&
  value !== null &&
  typeof (value as { setHeader?: unknown }).setHeader === 'function'

/**
 * How the client address of a call is found: `clientIp` when given; else, with `trustProxy`, X-Forwarded-For of
 * the request in the context read past the trusted hops (a Node request only when its connection comes from a
 * trusted proxy, hop 0; a fetch `Request` has no connection, and its platform's proxy is hop 0); else the Node
 * request's socket address (`nodeAddress`).
 */
export function addressOf<TContext, TMeta>(
  clientIp: ((call: TrpcCall<TContext, TMeta>) => string | undefined) | undefined,
  trusted: TrustedHop | undefined,
  keyed: boolean,
  where: string,
): (call: TrpcCall<TContext, TMeta>) => string | undefined {
  if (clientIp !== undefined) return clientIp
  if (trusted === undefined) return (call) => nodeAddress(call, keyed, where)
  return (call) => {
    const fetchRequest = fetchRequestOf(call)
    if (fetchRequest !== undefined)
      return forwardedClient(fetchRequest.headers.get('x-forwarded-for'), trusted)
    const peer = nodeAddress(call, keyed, where)
    if (peer === undefined || !trusted(peer, 0)) return peer
    const header = nodeRequestOf(call)?.headers['x-forwarded-for']
    return forwardedClient(Array.isArray(header) ? header.join(',') : header, trusted) ?? peer
  }
}

/** The fetch adapter's `Request` in the context (`ctx.req`, where your `createContext` put it). */
export function fetchRequestOf(
  call: TrpcCall,
): { headers: { get(name: string): string | null } } | undefined {
  const request = (call.ctx as { req?: unknown } | undefined)?.req
  if (typeof request !== 'object' || request === null || 'socket' in request) return undefined
  const headers = (request as { headers?: unknown }).headers
  return typeof (headers as Headers | undefined)?.get === 'function'
    ? (request as { headers: { get(name: string): string | null } })
    : undefined
}

/** The Node request in the context (`ctx.req`, as tRPC's Node adapters give it); none with the fetch adapter. */
function nodeRequestOf(call: TrpcCall): NodeRequest | undefined {
  const request = (call.ctx as { req?: unknown } | undefined)?.req
  if (typeof request !== 'object' || request === null || !('socket' in request) || !('headers' in request))
    return undefined
  return request as NodeRequest
}

/**
 * The default client address: the socket's, of the Node request in the context. Without one (the fetch adapter,
 * or a context without `req`): none when `key` keys the call (the address lists then match no address), else a
 * coded error naming `key`, since the fetch adapter's `Request` carries no address.
 */
function nodeAddress(call: TrpcCall, keyed: boolean, where: string): string | undefined {
  const request = nodeRequestOf(call)
  if (request !== undefined) return request.socket?.remoteAddress
  if (keyed) return undefined
  throw new RateLimitError(
    'ERR_RATEWINDOW_INVALID_OPTION',
    `${where} found no client address: the tRPC context holds no Node request (\`ctx.req\`, as the standalone, Express and Fastify adapters give it). With the fetch adapter (Next.js route handlers, Workers, Bun, Deno) the request carries no address: pass \`key\` (e.g. the verified user in the context), \`trustProxy\` (with the fetch \`Request\` in \`ctx.req\`) or \`clientIp\`.`,
    { option: 'key' },
  )
}
