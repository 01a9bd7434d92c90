/** Programs of @ratewindow/elysia: its plugins typed against Elysia's own types, and run on Node (@elysiajs/node). */

/** Both plugins on one app: the options typed by the context, `ctx.rateLimit` and `ctx.slowDown` in a handler. */
export const ELYSIA_PROGRAM = `import { node } from '@elysiajs/node'
import { MemoryStore, type RateLimitContext, type RateLimitResult, rateLimit, slowDown } from '@ratewindow/elysia'
import { Elysia } from 'elysia'

const limiter = rateLimit({
  limit: 100,
  window: '1m',
  store: new MemoryStore(),
  key: (ctx: RateLimitContext) => ctx.request.headers.get('x-api-key') ?? ctx.path,
  skipFailedRequests: true,
  handler: (_ctx, result: RateLimitResult) => ({ retryAfter: result.retryAfter }),
})

export const app = new Elysia({ adapter: node() })
  .use(limiter)
  .group('/search', (group) =>
    group
      .use(slowDown({ delayAfter: 10, delayMs: (used) => used * 10, trustProxy: 1 }))
      .get('', ({ rateLimit, slowDown }) => {
        const remaining: number | undefined = rateLimit?.remaining
        return { remaining, delay: slowDown?.delay }
      }),
  )

export const forget = (key: string): Promise<void> => limiter.resetKey(key)
`

/**
 * Runtime check (ESM): an app limited to 2 requests a minute, served on Node by @elysiajs/node on a free port of
 * 127.0.0.1; it prints \`ok\` when the third request is refused with Retry-After.
 */
export const elysiaRun = `import { createServer } from 'node:net'
import { node } from '@elysiajs/node'
import { rateLimit } from '@ratewindow/elysia'
import { Elysia } from 'elysia'

const free = createServer().listen(0, '127.0.0.1')
await new Promise((resolve) => free.once('listening', resolve))
const { port } = free.address()
await new Promise((resolve) => free.close(resolve))

const app = new Elysia({ adapter: node() })
  .use(rateLimit({ limit: 2, window: '1m' }))
  .get('/', ({ rateLimit }) => ({ remaining: rateLimit?.remaining }))
await new Promise((resolve) => app.listen({ port, hostname: '127.0.0.1' }, resolve))
const answers = []
for (let i = 0; i < 3; i++) {
  const response = await fetch('http://127.0.0.1:' + port + '/')
  answers.push([response.status, response.headers.get('retry-after') !== null, await response.text()])
}
const expected = [[200, false, '{"remaining":1}'], [200, false, '{"remaining":0}']]
if (JSON.stringify(answers.slice(0, 2)) !== JSON.stringify(expected) || answers[2][0] !== 429 || !answers[2][1])
  throw new Error('answers ' + JSON.stringify(answers))
console.log('ok')
process.exit(0)
`
