import type { Middleware } from 'koa'
import { type AdminHandler, isUnder } from './handler.js'
import { parsedBody, webRequest } from './node.js'

/**
 * The admin endpoint in Koa (2 and 3): `app.use(koaAdmin(admin))`. Answers the requests under `admin.basePath`,
 * passes on every other.
 * @example app.use(koaAdmin(adminHandler({ limiters: [api], authorize, basePath: '/_ratewindow' })))
 */
export function koaAdmin(admin: AdminHandler): Middleware {
  return async function ratewindowAdmin(ctx, next) {
    if (!isUnder(admin.basePath, ctx.path)) return next()
    const body = (ctx.request as { body?: unknown }).body
    const answer = await admin(webRequest(ctx.req, ctx.originalUrl, parsedBody(ctx.req, body)))
    ctx.status = answer.status
    for (const [name, value] of answer.headers) ctx.set(name, value)
    ctx.body = await answer.text()
  }
}
