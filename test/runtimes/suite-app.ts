/**
 * The Hono side of the HTTP suite on Node, Bun and Deno (test/runtimes/hono-suite.test.ts): one process per runtime
 * (Node with `@hono/node-server`, Bun, Deno) runs this module, built to plain JavaScript, against the built
 * packages. The apps, by scenario name, and the control routes are suite-scenarios.ts's (shared with the workerd
 * Worker, suite-worker.ts); this module serves each app on a port of its own (127.0.0.1) with the runtime's own
 * server, and makes the stores.
 *
 * Control: the port printed on stdout as `{"runtime","port"}`; the routes of suite-scenarios.ts (`POST /start`
 * answers `{id, port}`), and `POST /exit`. Stores: `memory`, `ioredis`, `node-redis`, `ioredis-cluster`,
 * `node-redis-cluster`, `synced` (SyncedStore over ioredis), `failing`.
 */
import type { Store } from '@ratewindow/core'
import { type HonoRateLimitOptions, MemoryStore, RedisStore, SyncedStore } from '@ratewindow/hono'
import { type Fetch, suiteControl } from './suite-scenarios.js'

declare const Bun:
  | {
      env: Record<string, string | undefined>
      serve(options: {
        port: number
        hostname: string
        fetch: (request: Request, server: unknown) => unknown
      }): {
        port: number
        stop(closeActive?: boolean): Promise<void> | void
      }
    }
  | undefined
declare const Deno:
  | {
      env: { toObject(): Record<string, string | undefined> }
      serve(
        options: { port: number; hostname: string; onListen(): void },
        handler: (request: Request, info: unknown) => Response | Promise<Response>,
      ): { addr: { port: number }; shutdown(): Promise<void> }
      exit(code?: number): never
    }
  | undefined
declare const process: { env: Record<string, string | undefined>; exit(code?: number): never }

type Options = HonoRateLimitOptions

const runtime = typeof Bun !== 'undefined' ? 'bun' : typeof Deno !== 'undefined' ? 'deno' : 'node'
const env = runtime === 'bun' ? Bun!.env : runtime === 'deno' ? Deno!.env.toObject() : process.env
const { getConnInfo } = (await import(
  runtime === 'bun' ? 'hono/bun' : runtime === 'deno' ? 'hono/deno' : '@hono/node-server/conninfo'
)) as { getConnInfo: NonNullable<Options['getConnInfo']> }

/** Serves `fetch` on 127.0.0.1, a free port, with the runtime's own server. */
async function serve(fetch: Fetch): Promise<{ port: number; close(): Promise<void> }> {
  if (runtime === 'bun') {
    const server = Bun!.serve({ port: 0, hostname: '127.0.0.1', fetch })
    return { port: server.port, close: async () => void (await server.stop(true)) }
  }
  if (runtime === 'deno') {
    const server = Deno!.serve({ port: 0, hostname: '127.0.0.1', onListen() {} }, fetch)
    return { port: server.addr.port, close: () => server.shutdown() }
  }
  const { serve: serveNode } = await import('@hono/node-server')
  return new Promise((resolve) => {
    const server = serveNode({ fetch, port: 0, hostname: '127.0.0.1' }, (info) =>
      resolve({
        port: info.port,
        close: () =>
          new Promise((done) => {
            ;(server as unknown as { closeAllConnections?(): void }).closeAllConnections?.()
            server.close(() => done())
          }),
      }),
    )
  })
}

/** The Redis clients, made on first use and closed at exit. */
const clients = new Map<string, Promise<{ client: unknown; close(): Promise<unknown> }>>()
const redisPort = Number(env.REDIS_PORT)
const clusterNodes = JSON.parse(env.CLUSTER_NODES ?? '[]') as { host: string; port: number }[]

function redisClient(kind: string): Promise<{ client: unknown; close(): Promise<unknown> }> {
  let connected = clients.get(kind)
  if (connected === undefined) {
    connected = connect(kind)
    clients.set(kind, connected)
  }
  return connected
}

async function connect(kind: string): Promise<{ client: unknown; close(): Promise<unknown> }> {
  if (kind === 'ioredis') {
    const { Redis } = await import('ioredis')
    const client = new Redis({ host: '127.0.0.1', port: redisPort, maxRetriesPerRequest: 1 })
    return { client, close: () => client.quit() }
  }
  if (kind === 'ioredis-cluster') {
    const { Cluster } = await import('ioredis')
    const client = new Cluster(clusterNodes, { redisOptions: { maxRetriesPerRequest: 1 } })
    await new Promise((resolve, reject) => {
      client.once('ready', resolve)
      client.once('error', reject)
    })
    return { client, close: () => client.quit() }
  }
  const { createClient, createCluster } = await import('redis')
  const client =
    kind === 'node-redis'
      ? createClient({ url: `redis://127.0.0.1:${redisPort}` })
      : createCluster({
          rootNodes: clusterNodes.map(({ host, port }) => ({ url: `redis://${host}:${port}` })),
        })
  await client.connect()
  return { client, close: () => client.close() }
}

const down = () => Promise.reject(new Error('connection refused'))

async function makeStore(kind: string, clock: () => number): Promise<Store> {
  const prefix = `rt-${runtime}-${crypto.randomUUID()}:`
  if (kind === 'memory') return new MemoryStore({ clock })
  if (kind === 'failing') return { consume: down, peek: down, refund: down, reset: down }
  if (kind === 'synced') {
    const { client } = await redisClient('ioredis')
    return new SyncedStore({ client: client as never, clock, prefix })
  }
  const { client } = await redisClient(kind)
  return new RedisStore({ client: client as never, clock, prefix })
}

const { control, closeAll } = suiteControl({
  getConnInfo,
  makeStore,
  serve: async (fetch) => {
    const server = await serve(fetch)
    return { where: { port: server.port }, close: server.close }
  },
})
control.post('/exit', async (c) => {
  await closeAll()
  for (const connected of clients.values()) await (await connected).close()
  setTimeout(() => (runtime === 'deno' ? Deno!.exit(0) : process.exit(0)), 10)
  return c.json({ exiting: true })
})

const { port } = await serve(control.fetch as Fetch)
console.log(JSON.stringify({ runtime, port }))
