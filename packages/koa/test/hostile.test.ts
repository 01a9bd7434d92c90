/**
 * Hostile clients (issue 45) of `@ratewindow/koa` on real servers, Koa 3 and 2: the attacks of every HTTP surface
 * (test/support/hostile-http-suite.ts), as the attacker wrote them, raw HTTP/1.1 on a socket of its own. One server
 * per Koa version: an app without `app.proxy`, and one with `app.proxy` and `app.maxIpsCount = 1` (1 hop) for the
 * paths under /trusted/.
 */
import { type RateLimitMiddleware, rateLimit, slowDown } from '@ratewindow/koa'
import Koa3, { type Middleware } from 'koa'
import Koa2 from 'koa2'
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

/** The attack routes on `app` (no router: each path's middleware in turn), behind an error middleware that answers 500. */
function mount(
  app: Koa3,
  { routes, ran, errors }: AttackApp,
  paths: string[],
): Record<string, LimiterHandles> {
  const limiters: Record<string, LimiterHandles> = {}
  const chains = new Map<string, Middleware[]>()
  const prefixes: [string, RateLimitMiddleware][] = []
  for (const path of paths) {
    const route = routes[path]!
    if (route.prefixLimit) prefixes.push([route.prefixLimit.under, rateLimit(route.prefixLimit.options)])
    const chain: Middleware[] = []
    if (route.rateLimit) {
      const limiter = rateLimit(route.rateLimit)
      limiters[path] = limiter
      chain.push(limiter)
    }
    if (route.slowDown) chain.push(slowDown(route.slowDown))
    chain.push(async (ctx) => {
      ran[path] = (ran[path] ?? 0) + 1
      await route.work?.()
      ctx.body = 'ok'
    })
    chains.set(path, chain)
  }
  // Writes to clients that left fail: Koa reports them here (it would print each).
  app.on('error', (error: Error & { code?: string }) => {
    if (error.code !== 'ECONNRESET' && error.code !== 'EPIPE') errors.push(error.code ?? String(error))
  })
  app.use(async (ctx, next) => {
    try {
      await next()
    } catch (error) {
      errors.push((error as { code?: string }).code ?? String(error))
      ctx.status = 500
      ctx.body = 'error handler'
    }
  })
  for (const [under, limiter] of prefixes)
    app.use((ctx, next) => (ctx.path.startsWith(`${under}/`) ? limiter(ctx, next) : next()))
  app.use((ctx, next) => {
    const chain = chains.get(ctx.path)
    if (chain === undefined) return next()
    const run = (index: number): Promise<unknown> => Promise.resolve(chain[index]!(ctx, () => run(index + 1)))
    return run(0)
  })
  return limiters
}

function framework(name: string, Koa: typeof Koa3): AttackedFramework {
  return {
    name,
    async serve(app) {
      const paths = Object.keys(app.routes)
      const open = new Koa()
      const trusted = new Koa()
      trusted.proxy = true
      trusted.maxIpsCount = 1
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
        ['/trusted/', trusted.callback()],
        ['/', open.callback()],
      ])
      return { server, limiters }
    },
  }
}

describeHostileClients([framework('Koa 3', Koa3), framework('Koa 2', Koa2 as unknown as typeof Koa3)])
