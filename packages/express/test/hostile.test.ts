/**
 * Hostile clients (issue 45) of `@ratewindow/express` on real servers, Express 5 and 4: the attacks of every HTTP
 * surface (test/support/hostile-http-suite.ts), as the attacker wrote them, raw HTTP/1.1 on a socket of its own.
 * One server per Express version: an app without `trust proxy`, and one with `trust proxy` set to 1 hop for the
 * paths under /trusted/.
 */
import { rateLimit, slowDown } from '@ratewindow/express'
import express5, { type ErrorRequestHandler, type Express } from 'express'
import express4 from 'express4'
import { afterAll, expect } from 'vitest'
import {
  type AttackApp,
  type AttackedFramework,
  describeHostileClients,
  type LimiterHandles,
} from '../../../test/support/hostile-http-suite.js'
import { serveApps } from '../../../test/support/raw-http.js'
import { unhandledRejections } from '../../../test/support/unhandled.js'

const unhandled = unhandledRejections()
afterAll(() => expect(unhandled).toEqual([]))

/** The attack routes on `app`, and an error handler that answers 500 and records each error's code. */
function mount(
  app: Express,
  { routes, ran, errors }: AttackApp,
  paths: string[],
): Record<string, LimiterHandles> {
  const limiters: Record<string, LimiterHandles> = {}
  for (const path of paths) {
    const route = routes[path]!
    if (route.prefixLimit) app.use(route.prefixLimit.under, rateLimit(route.prefixLimit.options))
    const middleware = []
    if (route.rateLimit) {
      const limiter = rateLimit(route.rateLimit)
      limiters[path] = limiter
      middleware.push(limiter)
    }
    if (route.slowDown) middleware.push(slowDown(route.slowDown))
    app.get(path, ...middleware, async (_request, response) => {
      ran[path] = (ran[path] ?? 0) + 1
      await route.work?.()
      response.send('ok') // also when the client left: the handler ends its response
    })
  }
  const recordError: ErrorRequestHandler = (error, _request, response, _next) => {
    errors.push((error as { code?: string }).code ?? String(error))
    response.status(500).send('error handler')
  }
  app.use(recordError)
  return limiters
}

function framework(name: string, create: typeof express5): AttackedFramework {
  return {
    name,
    async serve(app) {
      const paths = Object.keys(app.routes)
      const open = create()
      const trusted = create()
      trusted.set('trust proxy', 1)
      const limiters = {
        ...mount(
          open,
          app,
          paths.filter((path) => !path.startsWith('/trusted/')),
        ),
        ...mount(
          trusted,
          app,
          paths.filter((path) => path.startsWith('/trusted/')),
        ),
      }
      const server = await serveApps([
        ['/trusted/', trusted],
        ['/', open],
      ])
      return { server, limiters }
    },
  }
}

describeHostileClients([
  framework('Express 5', express5),
  framework('Express 4', express4 as unknown as typeof express5),
])
