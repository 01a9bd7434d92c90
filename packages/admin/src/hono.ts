import type { MiddlewareHandler } from 'hono'
import { type AdminHandler, isUnder } from './handler.js'

/**
 * The admin endpoint in Hono (any runtime with Web requests): `app.use(honoAdmin(admin))`. Answers the requests
 * under `admin.basePath` with the handler's own `Response`, passes on every other.
 * @example app.use(honoAdmin(adminHandler({ limiters: [api], authorize, basePath: '/_ratewindow' })))
 */
export function honoAdmin(admin: AdminHandler): MiddlewareHandler {
  return async function ratewindowAdmin(c, next) {
    if (!isUnder(admin.basePath, new URL(c.req.url).pathname)) return next()
    return admin(c.req.raw)
  }
}
