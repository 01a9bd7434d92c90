/** `RateLimiterObject`: the Durable Object that keeps the state and decides with core's code. */
import { type RemoteAnswer, type RemoteCall, runRemoteCall } from '@ratewindow/core/remote'
import type { DurableObjectResponseLike, DurableObjectStateLike, DurableObjectStorageLike } from './like.js'

/** The calls after which expired state may be left to sweep: those that write. */
const SWEPT = new Set<RemoteCall['op']>(['consume', 'refund', 'charge', 'give', 'acquire', 'override'])

/** How often the object drops expired state from its storage (Durable Object alarm). */
const SWEEP_MS = 5 * 60_000
const SWEEP_PAGE = 500

/**
 * The Durable Object that keeps rate limit state: re-export it from your Worker and bind it (wrangler config
 * `durable_objects.bindings`, with a migration). Each object decides the keys routed to it one call at a time,
 * with core's algorithms (the code MemoryStore runs), reading and writing its storage: a decision is atomic and
 * survives the object's restarts. The override records of its keys (`overrides: true`) live in its storage too,
 * read by the call that decides. Time is the object's clock (`Date.now()` inside the object: the server time).
 * Expired state and ended records are dropped by an alarm every 5 minutes, and on each touch.
 */
export class RateLimiterObject {
  readonly #storage: DurableObjectStorageLike
  #alarmChecked = false

  constructor(state: DurableObjectStateLike, _env?: unknown) {
    this.#storage = state.storage
  }

  /** Answers a batch of calls from `DurableObjectStore` (POST, JSON), in order. */
  async fetch(request: { text(): Promise<string> }): Promise<DurableObjectResponseLike> {
    let calls: RemoteCall[]
    try {
      calls = JSON.parse(await request.text()) as RemoteCall[]
      if (!Array.isArray(calls)) throw new TypeError('expected an array of calls')
    } catch (error) {
      return new Response(`ratewindow: unreadable request: ${(error as Error).message}`, { status: 400 })
    }
    const answers: RemoteAnswer[] = []
    for (const call of calls) {
      try {
        answers.push(await this.#run(call))
      } catch (error) {
        answers.push({ error: (error as Error)?.message ?? String(error) })
      }
    }
    return new Response(JSON.stringify(answers), { headers: { 'content-type': 'application/json' } })
  }

  /**
   * One call: read the state, decide, write it back (core's remote-store kit). No other call of this object runs
   * between the read and the write (the runtime's input gate holds other events while storage is read).
   */
  #run(call: RemoteCall): Promise<RemoteAnswer> {
    if (SWEPT.has(call.op) && (call as { now?: number }).now === undefined) this.#armSweep()
    return runRemoteCall(call, this.#storage, () => Date.now())
  }

  /** Makes sure an alarm will sweep expired state (once per object instance; not for a store's test clock). */
  #armSweep(): void {
    if (this.#alarmChecked) return
    this.#alarmChecked = true
    void this.#storage
      .getAlarm()
      .then((at) => (at === null ? this.#storage.setAlarm(Date.now() + SWEEP_MS) : undefined))
      .catch(() => {
        this.#alarmChecked = false
      })
  }

  /** The sweep: deletes state whose expiry has passed, then comes back while anything is left. */
  async alarm(): Promise<void> {
    const now = Date.now()
    let startAfter: string | undefined
    let left = 0
    for (;;) {
      const page = await this.#storage.list(
        startAfter === undefined ? { limit: SWEEP_PAGE } : { startAfter, limit: SWEEP_PAGE },
      )
      for (const [key, value] of page) {
        startAfter = key
        const expiresAt = (value as { expiresAt?: unknown } | undefined)?.expiresAt
        if (typeof expiresAt === 'number' && expiresAt <= now) await this.#storage.delete(key)
        else left++
      }
      if (page.size < SWEEP_PAGE) break
    }
    if (left > 0) await this.#storage.setAlarm(now + SWEEP_MS)
  }
}
