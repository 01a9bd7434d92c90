/**
 * h3 2 and h3 1 apps served by Node's HTTP server on 127.0.0.1, as users serve them (`toNodeHandler` of h3 2,
 * `toNodeListener` of h3 1), with one middleware in front of a few routes: the apps of h3.test.ts and
 * hostile.test.ts.
 */
import { createServer, type RequestListener, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { Readable } from 'node:stream'
import { createEventStream, H3, HTTPResponse, iterable } from 'h3'
import { toNodeHandler } from 'h3/node'
import { createApp, createRouter, eventHandler, setResponseStatus, toNodeListener } from 'h3-v1'
import { afterEach } from 'vitest'

export type Major = 'h3 2' | 'h3 1'

/** A middleware of ours, as either major takes it. */
type Middleware = (event: never, next?: () => unknown) => Promise<unknown>

let release = () => {}
let released = Promise.resolve()

/**
 * Holds the last chunk of every `/stream` answer from now until `releaseStreams()`: a stream whose first chunk is
 * sent is then the handler's work still running.
 */
export function holdStreams(): void {
  released = new Promise<void>((resolve) => {
    release = resolve
  })
}

/** Lets the `/stream` answers held by `holdStreams()` end. */
export const releaseStreams = (): void => release()

/** A body of two chunks, the second sent once the streams are released. */
function heldStream(): ReadableStream<Uint8Array> {
  let sent = 0
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      if (sent++ > 0) await released
      if (sent > 2) return controller.close()
      controller.enqueue(new TextEncoder().encode(`chunk ${sent}\n`))
    },
  })
}

/**
 * Two chunks as an async generator, the second once the streams are released; with `fail`, a throw in its place.
 */
async function* heldChunks(fail = false): AsyncGenerator<string> {
  yield 'chunk 1\n'
  await released
  if (fail) throw new Error('the stream failed mid-way')
  yield 'chunk 2\n'
}

/** An event stream of h3 2 (`createEventStream`) sending two messages, the second once the streams are released. */
function heldEvents(event: Parameters<typeof createEventStream>[0]): ReturnType<typeof createEventStream> {
  const events = createEventStream(event)
  void (async () => {
    await events.push('one')
    await released
    await events.push('two')
    await events.close()
  })()
  return events
}

/**
 * The routes: `/` and `/api/data` answer what the middlewares put on the context; `/status/:code` answers with that
 * status (a failed response for `skipFailedRequests`); `/stream` a streamed body (a `Response` of it on h3 2, the
 * stream itself on h3 1 and at h3 2's `/stream/raw`), held by `holdStreams()`. On h3 2, the same held stream as
 * h3's own helpers give it (the outside attack round of issue 50's second round, H1): `/stream/iterable`
 * (`iterable()` of a generator; `/stream/iterable-fails` throws in place of its last chunk), `/stream/events`
 * (`createEventStream()` returned), `/stream/h3-response` (`new HTTPResponse(stream)`), `/stream/node` (a Node
 * `Readable`).
 */
function routesFor(major: Major, middleware: Middleware, mount?: string): RequestListener {
  const context = (event: { context: Record<string, unknown> }) => ({
    remaining: (event.context.rateLimit as { remaining?: number } | undefined)?.remaining,
    slowDown: event.context.slowDown,
  })
  if (major === 'h3 2') {
    const app = new H3()
    if (mount === undefined) app.use(middleware as never)
    else app.use(`${mount}/**`, middleware as never)
    app.get('/', (event) => context(event))
    app.get('/api/data', (event) => context(event))
    app.get(
      '/status/:code',
      (event) => new Response('answered', { status: Number(event.context.params?.code) }),
    )
    app.get('/stream', () => new Response(heldStream()))
    app.get('/stream/raw', () => heldStream())
    app.get('/stream/iterable', () => iterable(heldChunks()))
    app.get('/stream/iterable-fails', () => iterable(heldChunks(true)))
    app.get('/stream/events', (event) => heldEvents(event))
    app.get('/stream/h3-response', () => new HTTPResponse(heldStream()))
    app.get('/stream/node', () => Readable.from(heldChunks()))
    return toNodeHandler(app) as RequestListener
  }
  const app = createApp()
  const router = createRouter()
  router.get(
    '/',
    eventHandler((event) => context(event)),
  )
  router.get(
    '/api/data',
    eventHandler((event) => context(event)),
  )
  router.get(
    '/status/:code',
    eventHandler((event) => {
      setResponseStatus(event, Number(event.context.params?.code))
      return 'answered'
    }),
  )
  router.get(
    '/stream',
    eventHandler(() => heldStream()),
  )
  if (mount === undefined) app.use(middleware as never)
  else app.use(mount, middleware as never)
  app.use(router)
  return toNodeListener(app) as RequestListener
}

const servers: Server[] = []
afterEach(async () => {
  for (const server of servers.splice(0)) {
    server.closeAllConnections()
    await new Promise((resolve) => server.close(resolve))
  }
})

/**
 * `middleware` in front of the routes of `major`'s app (for every path, or for the paths under `mount`), served on
 * a free port; returns its base URL.
 */
export async function served(major: Major, middleware: Middleware, mount?: string): Promise<string> {
  const server = createServer(routesFor(major, middleware, mount))
  servers.push(server)
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`
}

export const MAJORS: Major[] = ['h3 2', 'h3 1']
