/**
 * A streamed body is the handler's work going on after it returned (a model's answer, a generator's chunks): for
 * fetch-style frameworks, where the engine learns that the handler returned but not that its body was sent, these
 * follow the body itself, so that a concurrency slot is held until the last chunk is sent (or the client left),
 * and a refund is judged then. Releasing the slot when the handler returned would let one client run any number
 * of streams at once.
 *
 * Typed by the parts they read, not by the DOM's types (core's declarations do not depend on them): a Web
 * `ReadableStream` is one of each runtime's globals.
 */
import type { FetchResponse } from './fetch-response.js'

/** The part of a Web `ReadableStream` read here. */
export interface StreamLike<Chunk = unknown> {
  getReader(): {
    read(): Promise<{ done: boolean; value?: Chunk }>
    cancel(reason?: unknown): Promise<void>
  }
}

/** The constructor of the runtime's `ReadableStream`, as far as it is used here. */
type StreamConstructor = new <Chunk>(
  source: {
    pull(controller: {
      enqueue(chunk: Chunk): void
      close(): void
      error(error: unknown): void
    }): Promise<void>
    cancel(reason: unknown): Promise<void>
  },
  strategy: { highWaterMark: number },
) => StreamLike<Chunk>

/**
 * `body`, read through on demand (one chunk is read when the client's side asks for one): `ended` runs once,
 * when it ends, fails (`true`) or is cancelled (the client left).
 */
export function watchedBody<Body extends StreamLike>(body: Body, ended: (failed: boolean) => void): Body {
  const reader = body.getReader()
  let over = false
  const end = (failed: boolean) => {
    if (over) return
    over = true
    ended(failed)
  }
  const Stream = (globalThis as unknown as { ReadableStream: StreamConstructor }).ReadableStream
  return new Stream<unknown>(
    {
      async pull(controller) {
        const chunk = await reader.read().catch((error: unknown) => {
          end(true)
          controller.error(error)
          return undefined
        })
        if (chunk === undefined) return
        if (!chunk.done) return controller.enqueue(chunk.value)
        controller.close()
        end(false)
      },
      cancel(reason) {
        end(false)
        return reader.cancel(reason)
      },
    },
    { highWaterMark: 0 },
  ) as Body
}

/**
 * An async or sync iterable that a framework streams (a generator handler), read through: `ended` runs once, when
 * it returns, throws (`true`) or is closed early (`return()`, the client left). One that is closed before it
 * started ends too.
 */
export function watchedIterable<Chunk>(
  source: AsyncIterable<Chunk> | Iterable<Chunk>,
  ended: (failed: boolean) => void,
): AsyncGenerator<Chunk, unknown, undefined> {
  let over = false
  const end = (failed: boolean) => {
    if (over) return
    over = true
    ended(failed)
  }
  const generator = (async function* watched() {
    let failed = false
    try {
      return yield* source
    } catch (error) {
      failed = true
      throw error
    } finally {
      end(failed)
    }
  })()
  // A generator closed before its first step never runs its `finally`.
  const close = generator.return.bind(generator)
  generator.return = (value) => close(value).finally(() => end(false))
  return generator
}

/**
 * What the engine follows of a response whose body may still be sending: `tracked` finishes with `status` once the
 * body ended (500 if it failed), at once when there is nothing to send (no body, or a HEAD request's, which no
 * framework reads). Returns the body to send in its place, or undefined when it finished at once.
 */
export function followedBody<Body extends StreamLike>(
  body: Body | null | undefined,
  method: string,
  status: number,
  tracked: FetchResponse,
): Body | undefined {
  if (body === null || body === undefined || method === 'HEAD') {
    tracked.finish(status)
    return undefined
  }
  return watchedBody(body, (failed) => tracked.finish(failed ? 500 : status))
}
