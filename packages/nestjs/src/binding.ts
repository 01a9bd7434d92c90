import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http'
import type { SlowDownInfo } from '@ratewindow/core'
import {
  type FrameworkBinding,
  socketClosed,
  type TrackedResponse,
  trustsEveryHop,
} from '@ratewindow/core/adapter'

/**
 * The request a guard sees: Express's request on `@nestjs/platform-express`, Fastify's on
 * `@nestjs/platform-fastify`. Options such as `key` read what both have (`headers`, `ip`) or what the app's own
 * guards set (`request.user`).
 */
export interface NestHttpRequest {
  headers: IncomingHttpHeaders
  /** The client address after the platform's trust-proxy setting. */
  ip?: string
  method?: string
  url?: string
  /** What `slowDown()` decided for this request (on Node's request on platform-fastify: `request.raw.slowDown`). */
  slowDown?: SlowDownInfo
  // biome-ignore lint/suspicious/noExplicitAny: what other guards and middleware put on the request (`user`, …)
  [field: string]: any
}

/** Which of Nest's HTTP platforms the app runs on (`HttpAdapterHost.httpAdapter.getType()`). */
export type NestPlatform = 'express' | 'fastify'

interface ExpressLike extends NestHttpRequest {
  socket: IncomingMessage['socket']
  app: { get(name: string): unknown }
  route?: { path?: unknown }
}

interface FastifyLike extends NestHttpRequest {
  raw: IncomingMessage
  routeOptions?: { url?: string }
}

/**
 * The response a two-parameter `requestWasSuccessful(request, response)` receives: Express's response on
 * `@nestjs/platform-express`, Fastify's reply on `@nestjs/platform-fastify` (the middleware form: the
 * middleware's response, Node's under Fastify); `statusCode` on each.
 */
export interface NestHttpResponse {
  /** The status sent. */
  statusCode: number
  // biome-ignore lint/suspicious/noExplicitAny: the rest of the platform's response object
  [field: string]: any
}

/** A response as the guard gets it: Express's (a Node response) or Fastify's reply (with `raw`). */
export type PlatformResponse = (ServerResponse & { headersSent: boolean }) | FastifyReplyLike

export interface FastifyReplyLike {
  raw: ServerResponse
  sent: boolean
  header(name: string, value: string): unknown
}

export function isFastifyReply(response: unknown): response is FastifyReplyLike {
  return typeof (response as Partial<FastifyReplyLike>).header === 'function' && 'raw' in (response as object)
}

/** The Node response under either platform's response object, which `track` listens to. */
export function rawResponse(response: PlatformResponse): TrackedResponse {
  return isFastifyReply(response) ? response.raw : response
}

/** Sets headers on either platform's response, unless they were sent already. */
export function writeHeaders(response: unknown, headers: Record<string, string>): void {
  if (isFastifyReply(response)) {
    if (response.sent || response.raw.headersSent) return
    for (const name in headers) response.header(name, headers[name]!)
    return
  }
  const target = response as ServerResponse
  if (!target.headersSent) for (const name in headers) target.setHeader(name, headers[name]!)
}

const expressBinding: FrameworkBinding<NestHttpRequest> = {
  name: 'NestJS (Express)',
  clientIp: (request) => request.ip ?? (request as ExpressLike).socket?.remoteAddress,
  untrustedForwardedFor: (request) =>
    request.headers['x-forwarded-for'] === undefined
      ? undefined
      : !(request as ExpressLike).app?.get('trust proxy'),
  trustProxyHint:
    "call app.set('trust proxy', <number of proxies or their addresses>) on the NestExpressApplication",
  permissiveTrustProxy: (request) => (request as ExpressLike).app?.get('trust proxy') === true,
  permissiveTrustProxyHint:
    "Call app.set('trust proxy', 1) (the number of proxies in front of the app) or their addresses, e.g. 'loopback'.",
  // A request waiting for its slot (`delay`) gives it back when its client leaves.
  onClose: (request, listener) => socketClosed((request as ExpressLike).socket, listener),
  gone: (request) => (request as ExpressLike).socket?.destroyed === true,
  route: (request) => {
    const path = (request as ExpressLike).route?.path
    return typeof path === 'string' ? path : undefined
  },
  writeHeaders,
}

const fastifyBinding: FrameworkBinding<NestHttpRequest> = {
  name: 'NestJS (Fastify)',
  // Fastify's request, or Node's in a Nest middleware (middie copies Fastify's `ip` onto it).
  clientIp: (request) => request.ip || socketOf(request)?.remoteAddress,
  // Fastify does not expose `trustProxy` after construction; without it, request.ip is the socket address.
  untrustedForwardedFor: (request) =>
    request.headers['x-forwarded-for'] === undefined
      ? undefined
      : request.ip === socketOf(request)?.remoteAddress,
  trustProxyHint:
    "create the adapter with new FastifyAdapter({ trustProxy }): your proxies' addresses (e.g. '127.0.0.1' or " +
    "['10.0.0.0/8']) or a function such as (address, hop) => hop < 1, because Fastify 5 trusts nothing for a number",
  permissiveTrustProxy: trustsEveryHop,
  permissiveTrustProxyHint:
    "Replace trustProxy: true in new FastifyAdapter({ trustProxy }) with your proxies' addresses (e.g. '127.0.0.1' " +
    "or ['10.0.0.0/8']) or a function such as (address, hop) => hop < 1 (Fastify 5 trusts nothing for a number of hops).",
  onClose: (request, listener) => socketClosed(socketOf(request), listener),
  gone: (request) => socketOf(request)?.destroyed === true,
  route: (request) => (request as FastifyLike).routeOptions?.url,
  writeHeaders,
}

const socketOf = (request: NestHttpRequest): IncomingMessage['socket'] | undefined =>
  ((request as FastifyLike).raw ?? (request as ExpressLike)).socket

/** What the engine is told about the platform the app runs on. */
export function bindingOf(platform: NestPlatform): FrameworkBinding<NestHttpRequest> {
  return platform === 'fastify' ? fastifyBinding : expressBinding
}
