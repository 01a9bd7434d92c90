// Run by test/runtimes/bun-deno.test.ts under Bun, from the built packages (issue 32, item 13): clients that
// leave while an earlier middleware is still working, before @ratewindow/hono decides. Prints one JSON line: how
// many requests went past the limiter, the errors the app's error handler got, handler runs, the keys counted
// and what was written to console.error or console.warn.
import { connect } from 'node:net'
import { MemoryStore, rateLimit } from '@ratewindow/hono'
import { Hono } from 'hono'
import { getConnInfo } from 'hono/bun'

const CLIENTS = 10
const seen = { entered: 0, passed: 0, aborted: 0, handled: 0, errors: [], logged: [] }
for (const level of ['error', 'warn']) {
  const write = console[level].bind(console)
  console[level] = (...args) => {
    seen.logged.push(args.map(String).join(' '))
    write(...args)
  }
}

/** Resolves when `signal` aborts (the client left), or after `ms` at the latest. */
function aborted(signal, ms) {
  if (signal.aborted) return Promise.resolve(true)
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), ms)
    signal.addEventListener('abort', () => resolve(clearTimeout(timer) ?? true), { once: true })
  })
}

const store = new MemoryStore()
const app = new Hono()
app.onError((error, c) => {
  seen.errors.push(error?.code ?? String(error))
  return c.text('error', 500)
})
// The earlier middleware (a session lookup): still working when its client leaves.
app.use(async (c, next) => {
  seen.entered++
  if (c.req.header('x-leave') !== undefined && (await aborted(c.req.raw.signal, 5_000))) seen.aborted++
  await next()
  seen.passed++
})
app.use(rateLimit({ limit: 5, window: '1m', store, getConnInfo }))
app.get('/', (c) => {
  seen.handled++
  return c.text('ok')
})

const server = globalThis.Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: app.fetch })
const until = async (condition) => {
  for (let i = 0; i < 1_000 && !condition(); i++) await new Promise((resolve) => setTimeout(resolve, 10))
}
for (let i = 0; i < CLIENTS; i++) {
  const entered = seen.entered
  const socket = connect(server.port, '127.0.0.1')
  await new Promise((resolve) => socket.once('connect', resolve))
  socket.write('GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Leave: 1\r\n\r\n')
  await until(() => seen.entered > entered)
  socket.destroy()
}
await until(() => seen.passed === CLIENTS)
const stays = await fetch(`http://127.0.0.1:${server.port}/`)
await server.stop(true)
const { entered, passed, aborted: gone, handled, errors, logged } = seen
console.log(
  JSON.stringify({
    entered,
    passed,
    aborted: gone,
    handled,
    errors,
    logged,
    keys: store.size,
    stays: stays.status,
  }),
)
