/**
 * The key's source, as the compiler asks for it (root tsconfig typechecks this file): a context with a Node request
 * (`req` with a socket) or an untyped one needs no `key`; any other context needs `key`, `trustProxy` or `clientIp`, since the
 * default key would find no address in it.
 */
import type { IncomingMessage } from 'node:http'
import { describe, expect, it } from 'vitest'
import { rateLimit } from '../src/index.js'

interface NodeContext {
  req: IncomingMessage
}
interface FetchContext {
  req: Request
  user: string
}

describe('the key source the compiler asks for', () => {
  it('builds every middleware the types allow, and the ones they refuse (refused at the call, naming `key`)', () => {
    const middlewares = [
      rateLimit<NodeContext>({ limit: 1 }),
      rateLimit<NodeContext>(),
      rateLimit({ limit: 1 }),
      rateLimit(),
      rateLimit<FetchContext>({ key: ({ ctx }) => ctx.user }),
      rateLimit<FetchContext>({ clientIp: () => '203.0.113.7' }),
      rateLimit<FetchContext>({ trustProxy: 1 }),
      rateLimit<FetchContext>({ key: ({ ctx }) => (ctx.user === '' ? undefined : ctx.user), trustProxy: 1 }),
      // @ts-expect-error: no address in the context: `key` or `clientIp` is required
      rateLimit<FetchContext>({ limit: 1 }),
      // @ts-expect-error: no address in the context: `key` or `clientIp` is required
      rateLimit<FetchContext>(),
    ]
    for (const middleware of middlewares) {
      expect(typeof middleware).toBe('function')
      middleware.close()
    }
  })
})
