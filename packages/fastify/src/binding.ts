import {
  connectionStalled,
  type FrameworkBinding,
  socketClosed,
  trustsEveryHop,
} from '@ratewindow/core/adapter'
import type { FastifyReply, FastifyRequest } from 'fastify'

/** What the engines of `rateLimit()` and `slowDown()` know of Fastify: addresses, trust proxy, routes. */
export const binding: FrameworkBinding<FastifyRequest> = {
  name: 'Fastify',
  clientIp: (request) => request.ip || request.raw.socket.remoteAddress,
  onClose: (request, listener) => socketClosed(request.raw.socket, listener),
  gone: (request) => request.raw.socket.destroyed === true,
  stalled: (request) => connectionStalled(request.raw),
  // Fastify does not expose `trustProxy` after construction; without it, request.ip is the socket address.
  untrustedForwardedFor: (request) =>
    request.headers['x-forwarded-for'] === undefined
      ? undefined
      : request.ip === request.raw.socket.remoteAddress,
  trustProxyHint:
    'create the server with Fastify({ trustProxy }): on Fastify 4 the number of proxies (1) or their addresses; ' +
    "on Fastify 5 their addresses (e.g. '127.0.0.1' or ['10.0.0.0/8']) or a function such as " +
    '(address, hop) => hop < 1, because Fastify 5 trusts nothing for a number',
  permissiveTrustProxy: trustsEveryHop,
  permissiveTrustProxyHint:
    "Replace trustProxy: true with your proxies' addresses (e.g. '127.0.0.1' or ['10.0.0.0/8']) or a function " +
    'such as (address, hop) => hop < 1; a number of hops works on Fastify 4 only (Fastify 5 trusts nothing for it).',
  // Fastify 4.10+ and 5: the route's URL pattern.
  route: (request) => request.routeOptions?.url,
  options: ['handler', 'hook'],
  writeHeaders: (reply, headers) => {
    const target = reply as FastifyReply
    if (!target.sent && !target.raw.headersSent) target.headers(headers)
  },
  // One limiter's fields per answer (core's `showFields`, in index.ts).
  showsOneQuota: true,
}
