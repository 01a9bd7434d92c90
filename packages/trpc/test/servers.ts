/**
 * The test servers: one router served by tRPC's Node adapter (the standalone server) and by its fetch adapter (on
 * a Node server through @hono/node-server's request listener), each on a free loopback port, asked with the real
 * @trpc/client over HTTP (`httpLink`, or `httpBatchLink` for batches). The router counts its resolver calls, so a
 * test can tell a call that ran from one refused before it.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { getRequestListener } from '@hono/node-server'
import {
  createTRPCClient,
  httpBatchLink,
  httpBatchStreamLink,
  httpLink,
  type TRPCClientError,
} from '@trpc/client'
import { initTRPC } from '@trpc/server'
import { fetchRequestHandler } from '@trpc/server/adapters/fetch'
import { createHTTPHandler } from '@trpc/server/adapters/standalone'
import {
  type KeySource,
  type RateLimitMiddleware,
  rateLimit,
  rateLimitErrorFormatter,
  type TrpcRateLimitOptions,
} from '../src/index.js'

export type AdapterKind = 'node' | 'fetch'

/** The context both adapters' `createContext` make: the adapter's request and response, and the caller. */
export interface Context {
  req: IncomingMessage | Request
  res?: ServerResponse
  resHeaders?: Headers
  user: string | undefined
}

export interface Meta {
  /** What a call of the procedure costs, read by a test's `cost` option. */
  cost?: number
}

function appRouter(middleware: RateLimitMiddleware<Context, Meta>, calls: { count: number }) {
  const t = initTRPC.context<Context>().meta<Meta>().create({ errorFormatter: rateLimitErrorFormatter })
  const limited = t.procedure.use(middleware)
  return t.router({
    hello: limited.query(({ ctx }) => {
      calls.count++
      return { remaining: ctx.rateLimit?.remaining, limit: ctx.rateLimit?.limit }
    }),
    save: limited.mutation(() => {
      calls.count++
      return 'saved'
    }),
    heavy: limited.meta({ cost: 5 }).query(() => {
      calls.count++
      return 'heavy'
    }),
    /** Settles its charge to `input` units once it ran. */
    settle: limited
      .input((input: unknown) => Number(input))
      .query(async ({ ctx, input }) => {
        calls.count++
        await ctx.rateLimit?.settle?.(input)
        return 'settled'
      }),
  })
}

export type AppRouter = ReturnType<typeof appRouter>

/** The headers of the last response the client received. */
export interface Seen {
  status: number | undefined
  headers: Headers | undefined
}

export interface TestServer {
  kind: AdapterKind
  url: string
  /** Resolver calls so far. */
  calls: { count: number }
  middleware: RateLimitMiddleware<Context, Meta>
  /**
   * A client of `user` (the `x-user` header), `forwardedFor` its X-Forwarded-For; `batch` for httpBatchLink
   * (`'stream'` for httpBatchStreamLink).
   */
  client(options?: { user?: string; forwardedFor?: string; batch?: boolean | 'stream' }): {
    trpc: ReturnType<typeof createTRPCClient<AppRouter>>
    seen: Seen
  }
  /** Errors tRPC's `onError` saw on the server. */
  errors: unknown[]
  close(): Promise<void>
}

/** A server of `kind` with `rateLimit(options)` on every procedure. */
export async function startServer(
  kind: AdapterKind,
  options: TrpcRateLimitOptions<Context, Meta>,
): Promise<TestServer> {
  const calls = { count: 0 }
  const errors: unknown[] = []
  // Unless a test says otherwise, a sliding window log: exact counts and no window boundary a test could cross (a
  // fixed window starts over at its boundary, a sliding window counter's estimate falls as it passes one), and a
  // wait of at most the window.
  if (options.rules === undefined && options.algorithm === undefined)
    options = { algorithm: 'sliding-window-log', ...options }
  // The context may hold either adapter's request, so the compiler asks for `key` or `clientIp`: the tests of the
  // default key pass neither on purpose.
  const middleware = rateLimit<Context, Meta>(
    options as TrpcRateLimitOptions<Context, Meta> & KeySource<Context>,
  )
  const router = appRouter(middleware, calls)
  const onError = ({ error }: { error: unknown }) => void errors.push(error)
  const userOf = (value: string | string[] | null | undefined) =>
    typeof value === 'string' && value !== '' ? value : undefined
  const server: Server =
    kind === 'node'
      ? createServer(
          createHTTPHandler({
            router,
            onError,
            createContext: ({ req, res }) => ({ req, res, user: userOf(req.headers['x-user']) }),
          }),
        )
      : createServer(
          getRequestListener((request) =>
            fetchRequestHandler({
              endpoint: '',
              req: request,
              router,
              onError,
              createContext: ({ req, resHeaders }) => ({
                req,
                resHeaders,
                user: userOf(req.headers.get('x-user')),
              }),
            }),
          ),
        )
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  return {
    kind,
    url,
    calls,
    middleware,
    errors,
    client({ user, forwardedFor, batch = false } = {}) {
      const seen: Seen = { status: undefined, headers: undefined }
      const link = (batch === 'stream' ? httpBatchStreamLink : batch ? httpBatchLink : httpLink)<AppRouter>({
        url,
        headers: {
          ...(user === undefined ? {} : { 'x-user': user }),
          ...(forwardedFor === undefined ? {} : { 'x-forwarded-for': forwardedFor }),
        },
        fetch: async (input, init) => {
          const response = await fetch(input, init)
          seen.status = response.status
          seen.headers = response.headers
          return response
        },
      })
      return { trpc: createTRPCClient<AppRouter>({ links: [link] }), seen }
    },
    async close() {
      middleware.close()
      server.closeAllConnections()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
}

/** The error a call rejected with (a `TRPCClientError`), or a failure when it did not reject. */
export async function refusalOf(call: Promise<unknown>): Promise<TRPCClientError<AppRouter>> {
  try {
    await call
  } catch (error) {
    return error as TRPCClientError<AppRouter>
  }
  throw new Error('the call passed; a refusal was expected')
}
