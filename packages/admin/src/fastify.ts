import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { type AdminHandler, isUnder } from './handler.js'
import { webRequest } from './node.js'

/**
 * The admin endpoint in Fastify (4 and 5): `app.register(fastifyAdmin(admin))`. Registers its routes under
 * `admin.basePath` in a context of their own, whose one body parser hands the raw body to the handler (which checks
 * its type and size itself): the app's parsers and content types stay as they are.
 * @example await app.register(fastifyAdmin(adminHandler({ limiters: [api], authorize, basePath: '/_ratewindow' })))
 */
export function fastifyAdmin(admin: AdminHandler): (app: FastifyInstance) => Promise<void> {
  return async function ratewindowAdmin(app) {
    app.removeAllContentTypeParsers()
    app.addContentTypeParser('*', (_request: FastifyRequest, payload: unknown, done) => done(null, payload))
    const handle = async (request: FastifyRequest, reply: FastifyReply) => {
      const url = request.raw.url ?? request.url
      if (!isUnder(admin.basePath, url.split('?')[0]!)) return reply.callNotFound()
      const stream = request.body as NodeJS.ReadableStream | undefined
      const answer = await admin(webRequest(request.raw, url, undefined, stream ?? request.raw))
      for (const [name, value] of answer.headers) reply.header(name, value)
      return reply.code(answer.status).send(await answer.text())
    }
    app.all(admin.basePath === '' ? '/*' : `${admin.basePath}/*`, handle)
    if (admin.basePath !== '') app.all(admin.basePath, handle)
  }
}
