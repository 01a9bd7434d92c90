import { connectionStalled, type FrameworkBinding, socketClosed, withoutPort } from '@ratewindow/core/adapter'
import type { Context } from 'koa'

/** What the engines of `rateLimit()` and `slowDown()` know of Koa: addresses, trust proxy, routes. */
export const binding: FrameworkBinding<Context> = {
  name: 'Koa',
  // Behind a trusted proxy, `ctx.ip` is its X-Forwarded-For entry as written: some proxies add the client's port.
  clientIp: (ctx) => (ctx.ip ? withoutPort(ctx.ip) : ctx.req.socket.remoteAddress),
  onClose: (ctx, listener) => socketClosed(ctx.req.socket, listener),
  app: (ctx) => ctx.app,
  // A closed connection takes the address with it (`ctx.ip` is '' then).
  gone: (ctx) => ctx.req.socket.destroyed === true,
  stalled: (ctx) => connectionStalled(ctx.req),
  untrustedForwardedFor: (ctx) => (ctx.get('x-forwarded-for') === '' ? undefined : !ctx.app.proxy),
  trustProxyHint: 'set app.proxy = true and app.maxIpsCount to the number of proxies',
  permissiveTrustProxy: (ctx) => ctx.app.proxy && !(ctx.app.maxIpsCount > 0),
  permissiveTrustProxyHint: 'Set app.maxIpsCount to the number of proxies in front of the app (e.g. 1).',
  // Set by @koa/router before a route's own middleware runs.
  route: (ctx) => {
    const matched = (ctx as { _matchedRoute?: unknown })._matchedRoute
    return typeof matched === 'string' ? matched : undefined
  },
  options: ['handler'],
  writeHeaders: (ctx, headers) => {
    const target = ctx as Context
    if (!target.headerSent) for (const name in headers) target.set(name, headers[name]!)
  },
  // One limiter's fields per answer (core's `showFields`, in index.ts).
  showsOneQuota: true,
}
