import type { IncomingMessage, ServerResponse } from 'node:http'
import { type AdminHandler, isUnder } from './handler.js'
import { parsedBody, sendResponse, webRequest } from './node.js'

/** A Nest middleware's request: Express's on platform-express, Node's on platform-fastify (middie). */
type NestRequest = IncomingMessage & { originalUrl?: string; body?: unknown }

/**
 * The admin endpoint in NestJS (11 and 12, platform-express or platform-fastify), as a functional middleware:
 * `consumer.apply(nestAdmin(admin)).forRoutes('*')` in a module's `configure`. Answers the requests under
 * `admin.basePath` (before guards, pipes and the app's routes), passes on every other.
 * @example consumer.apply(nestAdmin(adminHandler({ limiters: [api], authorize, basePath: '/_ratewindow' }))).forRoutes('*')
 */
export function nestAdmin(
  admin: AdminHandler,
): (request: NestRequest, response: ServerResponse, next: (error?: unknown) => void) => void | Promise<void> {
  // A lowercase function, not a class: Nest runs it as a functional middleware on either platform.
  return function ratewindowAdmin(request, response, next) {
    const url = request.originalUrl ?? request.url ?? '/'
    if (!isUnder(admin.basePath, url.split('?')[0]!)) return next()
    return admin(webRequest(request, url, parsedBody(request, request.body))).then((answer) =>
      sendResponse(answer, response),
    )
  }
}
