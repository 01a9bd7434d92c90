/**
 * `TrackedResponse` for fetch-style frameworks, where the handler returns a Web `Response` and there is no Node
 * response object to watch (Hono on every runtime, Next.js route handlers): the response is "finished" once the
 * handler returned it, "closed" then or when the client leaves first (the request's abort signal).
 */
import type { TrackedResponse } from './binding.js'

/** The part of a Web `AbortSignal` the response listens to (core's types do not depend on the DOM's). */
export interface AbortSignalLike {
  readonly aborted: boolean
  addEventListener(type: 'abort', listener: () => void): void
  removeEventListener(type: 'abort', listener: () => void): void
}

export class FetchResponse implements TrackedResponse {
  readonly #onFinish: (() => void)[] = []
  readonly #onClose: (() => void)[] = []
  readonly #signal: AbortSignalLike | undefined
  /** The status to judge: read when asked (Hono's `c.res`), or the one `finish` was given. */
  #status: () => number
  #finished = false
  #closed = false

  /**
   * @param options.signal The request's abort signal: the response closes when the client leaves first.
   * @param options.status Reads the status of the response the handler returned, when asked (else `finish`'s).
   */
  constructor(options: { signal?: AbortSignalLike | undefined; status?: () => number } = {}) {
    const { signal } = options
    this.#status = options.status ?? (() => 200)
    if (signal?.aborted) this.#closed = true
    else if (signal !== undefined) {
      this.#signal = signal
      signal.addEventListener('abort', this.#close)
    }
  }

  get statusCode(): number {
    return this.#status()
  }

  get writableFinished(): boolean {
    return this.#finished
  }

  get writableEnded(): boolean {
    return this.#finished
  }

  get destroyed(): boolean {
    return this.#closed
  }

  once(event: 'finish' | 'close', listener: () => void): void {
    ;(event === 'finish' ? this.#onFinish : this.#onClose).push(listener)
  }

  /** The handler returned its response, with `statusCode` when the status is not read (or threw: say 500). */
  finish(statusCode?: number): void {
    if (this.#finished) return
    if (statusCode !== undefined) this.#status = () => statusCode
    this.#finished = true
    for (const listener of this.#onFinish.splice(0)) listener()
    this.#close()
  }

  readonly #close = (): void => {
    if (this.#closed && this.#onClose.length === 0) return
    this.#closed = true
    this.#signal?.removeEventListener('abort', this.#close)
    for (const listener of this.#onClose.splice(0)) listener()
  }
}
