// Run by test/runtimes/bun-deno.test.ts under Bun or Deno, from the built packages: a Hono app with
// @ratewindow/hono on the runtime's own server, asked three times over HTTP (127.0.0.1). Prints one JSON line:
// the status and rate limit headers of each answer. STORE: memory, ioredis, node-redis (REDIS_PORT) or failing.
import { MemoryStore, RedisStore, rateLimit } from '@ratewindow/hono'
import { Hono } from 'hono'

const runtime = globalThis.Bun ? 'bun' : 'deno'
const env = runtime === 'bun' ? globalThis.Bun.env : globalThis.Deno.env.toObject()
const { getConnInfo } = await import(runtime === 'bun' ? 'hono/bun' : 'hono/deno')

let store
let close = async () => {}
const prefix = `rt-${runtime}-${env.STORE}-${Date.now()}:`
if (env.STORE === 'ioredis') {
  const { Redis } = await import('ioredis')
  const client = new Redis({ host: '127.0.0.1', port: Number(env.REDIS_PORT), maxRetriesPerRequest: 1 })
  store = new RedisStore({ client, prefix })
  close = () => client.quit()
} else if (env.STORE === 'node-redis') {
  const { createClient } = await import('redis')
  const client = createClient({ url: `redis://127.0.0.1:${env.REDIS_PORT}` })
  await client.connect()
  store = new RedisStore({ client, prefix })
  close = () => client.quit()
} else if (env.STORE === 'failing') {
  const down = () => Promise.reject(new Error('connection refused'))
  store = { consume: down, peek: down, refund: down, reset: down }
} else store = new MemoryStore()

const app = new Hono()
app.use(rateLimit({ limit: 2, window: '1m', store, getConnInfo, onError: () => {} }))
app.get('/', (c) => c.text(`ok ${c.get('rateLimit')?.key}`))

const server =
  runtime === 'bun'
    ? globalThis.Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: app.fetch })
    : globalThis.Deno.serve({ port: 0, hostname: '127.0.0.1', onListen() {} }, app.fetch)
const port = runtime === 'bun' ? server.port : server.addr.port
const answers = []
for (let i = 0; i < 3; i++) {
  const response = await fetch(`http://127.0.0.1:${port}/`)
  const headers = Object.fromEntries(
    [...response.headers].filter(([name]) => name.startsWith('ratelimit') || name === 'retry-after'),
  )
  answers.push({ status: response.status, headers, body: await response.text() })
}
await (runtime === 'bun' ? server.stop(true) : server.shutdown())
await close()
console.log(JSON.stringify({ runtime, answers }))
