import type { HonoRequest, MiddlewareHandler } from 'hono'
import { type AdminHandler, isUnder } from './handler.js'

/**
 * The admin endpoint in Hono (any runtime with Web requests): `app.use(honoAdmin(admin))`. Answers the requests
 * under `admin.basePath` with the handler's own `Response`, passes on every other.
 * @example app.use(honoAdmin(adminHandler({ limiters: [api], authorize, basePath: '/_ratewindow' })))
 */
export function honoAdmin(admin: AdminHandler): MiddlewareHandler {
  return async function ratewindowAdmin(c, next) {
    if (!isUnder(admin.basePath, new URL(c.req.url).pathname)) return next()
    return admin(await unread(c.req))
  }
}

/**
 * The request with its body readable: when a middleware before the mount read it (`await c.req.json()`), the text
 * Hono cached for it (`c.req.text()`), else the request as it is.
 */
async function unread(request: HonoRequest): Promise<Request> {
  const raw = request.raw
  if (!raw.bodyUsed) return raw
  try {
    return new Request(raw, { body: await request.text() })
  } catch {
    return raw
  }
}
