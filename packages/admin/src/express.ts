import type { NextFunction, Request, RequestHandler, Response } from 'express'
import { type AdminHandler, isUnder } from './handler.js'
import { parsedBody, sendResponse, webRequest } from './node.js'

/**
 * The admin endpoint in Express (4 and 5): `app.use(expressAdmin(admin))`. Answers the requests under
 * `admin.basePath` (the full path, whatever router it sits in), passes on every other.
 * @example app.use(expressAdmin(adminHandler({ limiters: [api], authorize, basePath: '/_ratewindow' })))
 */
export function expressAdmin(admin: AdminHandler): RequestHandler {
  return function ratewindowAdmin(request: Request, response: Response, next: NextFunction): void {
    const url = request.originalUrl ?? request.url
    if (!isUnder(admin.basePath, url.split('?')[0]!)) {
      next()
      return
    }
    admin(webRequest(request, url, parsedBody(request, request.body)))
      .then((answer) => sendResponse(answer, response))
      .catch(next)
  }
}
