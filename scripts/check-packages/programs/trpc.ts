/** Programs of @ratewindow/trpc: the server's adapters, the client reading a refusal, and a run over HTTP. */

import { loader, type ModuleSystem } from './load.js'

/** tRPC v11 on its standalone (Node) and fetch adapters, keyed by the typed context. */
export const TRPC_SERVER_PROGRAM = `import { initTRPC } from '@trpc/server'
import { fetchRequestHandler } from '@trpc/server/adapters/fetch'
import { type CreateHTTPContextOptions, createHTTPServer } from '@trpc/server/adapters/standalone'
import { MemoryStore, type RateLimitResult, rateLimit, rateLimitErrorFormatter, slidingWindowLog } from '@ratewindow/trpc'

const createContext = ({ req, res }: CreateHTTPContextOptions) => ({ req, res, user: req.headers['x-user'] })
type Context = Awaited<ReturnType<typeof createContext>>
const t = initTRPC.context<Context>().create({ errorFormatter: rateLimitErrorFormatter })
const limited = t.procedure.use(
  rateLimit<Context>({
    rules: ({ type }) => slidingWindowLog({ limit: type === 'mutation' ? 10 : 100, window: '1m' }),
    store: new MemoryStore(),
    key: ({ ctx }) => String(ctx.user ?? 'anonymous'),
  }),
)
export const router = t.router({
  hello: limited.query(({ ctx }) => {
    const decision: RateLimitResult | undefined = ctx.rateLimit
    return decision?.remaining
  }),
})
export const server = createHTTPServer({ router, createContext })

const f = initTRPC.context<{ req: Request; resHeaders: Headers }>().create()
const edge = f.router({ ping: f.procedure.use(rateLimit({ key: ({ ctx }) => ctx.req.headers.get('x-api-key') ?? '' })).query(() => 'pong') })
export const handler = (req: Request) =>
  fetchRequestHandler({ endpoint: '/api/trpc', req, router: edge, createContext: ({ req, resHeaders }) => ({ req, resHeaders }) })
`

/** The client reading a refusal's retryAfter, typed by the router's error formatter. */
export const TRPC_CLIENT_PROGRAM = `import { createTRPCClient, httpBatchLink, isTRPCClientError } from '@trpc/client'
import { initTRPC } from '@trpc/server'
import { rateLimit, rateLimitErrorFormatter } from '@ratewindow/trpc'

const t = initTRPC.create({ errorFormatter: rateLimitErrorFormatter })
const router = t.router({ hello: t.procedure.use(rateLimit({ key: () => 'all' })).query(() => 'hi') })
type AppRouter = typeof router

export async function retryAfter(): Promise<number | undefined> {
  const client = createTRPCClient<AppRouter>({ links: [httpBatchLink({ url: 'http://127.0.0.1:3000' })] })
  try {
    await client.hello.query()
    return undefined
  } catch (error) {
    return isTRPCClientError<AppRouter>(error) ? error.data?.retryAfter : undefined
  }
}
`

/**
 * Runtime check of @ratewindow/trpc: tRPC's standalone server with the middleware (limit 2 per address) asked by
 * @trpc/client over HTTP: two calls pass, the third is refused with TOO_MANY_REQUESTS, 429 and its retryAfter.
 */
export function trpcRun(moduleSystem: ModuleSystem): string {
  const load = loader(moduleSystem)
  return `async function main() {
  const { initTRPC } = ${load('@trpc/server')}
  const { createHTTPServer } = ${load('@trpc/server/adapters/standalone')}
  const { createTRPCClient, httpLink } = ${load('@trpc/client')}
  const { rateLimit, rateLimitErrorFormatter } = ${load('@ratewindow/trpc')}
  const t = initTRPC.context().create({ errorFormatter: rateLimitErrorFormatter })
  const router = t.router({ hello: t.procedure.use(rateLimit({ limit: 2 })).query(({ ctx }) => ctx.rateLimit.remaining) })
  const server = createHTTPServer({ router, createContext: ({ req, res }) => ({ req, res }) })
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
  const statuses = []
  const client = createTRPCClient({ links: [httpLink({ url: 'http://127.0.0.1:' + server.address().port, fetch: async (url, init) => {
    const response = await fetch(url, init)
    statuses.push(response.status + ' ' + response.headers.get('ratelimit-remaining'))
    return response
  } })] })
  const answers = [await client.hello.query(), await client.hello.query()]
  try {
    await client.hello.query()
  } catch (error) {
    answers.push(error.data.code, typeof error.data.retryAfter)
  }
  await new Promise((resolve) => server.close(resolve))
  const expected = '1,0,TOO_MANY_REQUESTS,number 200 1,200 0,429 0'
  if (answers.join() + ' ' + statuses.join() !== expected) throw new Error('answers ' + answers.join() + ' ' + statuses.join())
  console.log('ok')
}
main().catch((error) => { console.error(error); process.exit(1) })
`
}
