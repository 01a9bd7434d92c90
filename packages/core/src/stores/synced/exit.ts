/**
 * The process's `beforeExit`, for SyncedStore: each open store sends what it has not sent (`ExitSend`), through the
 * hooks of the open stores behind one process listener installed once. Node, Bun and Deno have a process to hook;
 * Workers do not (nothing outlives a request there).
 */
import type { Departures } from './departures.js'
import type { SyncLoop } from './sync-loop.js'

const exitHooks = new Set<() => void>()
let listeningBeforeExit = false

/** @internal Calls `hook` on the process's `beforeExit` until `offBeforeExit(hook)`. */
export function onBeforeExit(hook: () => void): void {
  exitHooks.add(hook)
  const host = (globalThis as { process?: { on?: (event: 'beforeExit', listener: () => void) => unknown } })
    .process
  if (listeningBeforeExit || typeof host?.on !== 'function') return
  listeningBeforeExit = true
  host.on('beforeExit', () => {
    for (const each of exitHooks) each()
  })
}

/** @internal No longer calls `hook` on `beforeExit`. */
export function offBeforeExit(hook: () => void): void {
  exitHooks.delete(hook)
}

/**
 * One store's send on `beforeExit`: the process has nothing left to do and is about to exit without `close()`, so
 * what has not been sent goes now, and the process is kept alive (at most `maxStale`) until Redis answers. Node
 * emits `beforeExit` only when nothing else keeps the process alive (an open Redis connection does), and never on
 * `process.exit()` or a signal.
 */
export class ExitSend {
  readonly #loop: SyncLoop
  readonly #departures: Departures
  readonly #maxStale: number
  readonly #onError: (error: unknown) => void
  readonly #hook = () => this.#send()
  #sending: Promise<void> | undefined
  /** The last send failed: no other is tried (each failure would bring `beforeExit` back). */
  #failed = false

  constructor(loop: SyncLoop, departures: Departures, maxStale: number, onError: (error: unknown) => void) {
    this.#loop = loop
    this.#departures = departures
    this.#maxStale = maxStale
    this.#onError = onError
    onBeforeExit(this.#hook)
  }

  /** No send on `beforeExit` any more (the store is closing). */
  stop(): void {
    offBeforeExit(this.#hook)
  }

  /** The cost units counted here and never acknowledged by Redis: unsent keys', and departing keys' too. */
  unsynced(): number {
    const unsent = new Set(this.#loop.marked)
    for (const entry of this.#departures.entries()) unsent.add(entry)
    let units = 0
    for (const entry of unsent) units += entry.unacked
    return units
  }

  #send(): void {
    if (this.#sending !== undefined || this.#failed) return
    // Evicted keys' counts not yet acknowledged go too (their own send may still wait for one in flight).
    for (const entry of this.#departures.entries()) if (entry.unacked > 0) this.#loop.markDirty(entry)
    if (this.#loop.marked.length === 0) return
    const alive = setTimeout(() => {}, this.#maxStale)
    this.#sending = this.#loop
      .sync()
      .then(
        () => {
          this.#failed = false
        },
        (error: unknown) => {
          this.#failed = true
          this.#onError(error)
        },
      )
      .finally(() => {
        clearTimeout(alive)
        this.#sending = undefined
      })
  }
}
