/**
 * SyncedStore's sync loop: every `interval`, every key used since its previous sync sends its unsent counts to
 * Redis and reads back the shared ones, and its override record when it has one to read, in as few scripts as the
 * keys allow (up to 256 keys each; on a Cluster, one script per hash slot); a key can also be sent at once
 * (`flush`). A failed sync puts its counts back with the unsent ones. The loop learns the server's time from each
 * reply: it is the store's clock.
 */
import { RateLimitError } from '../../support/errors.js'
import { realClearTimeout, realSetTimeout, steadyEpochNow } from '../../time/real-timers.js'
import { clearCounts, mergeCounts } from './counters.js'
import type { Departures } from './departures.js'
import { readRecord, type SyncEntry } from './entry.js'
import type { FailureMode } from './failure-mode.js'
import { type ScriptRunner, SYNC_RECORDS_SCRIPT, SYNC_SCRIPT } from './script.js'

/**
 * Most keys one sync script carries. A tick sends every key used in the interval in a few scripts rather than
 * one each (each script runs atomically, so this also caps how long one holds the server: ~1 ms).
 */
const BATCH_KEYS = 256

/**
 * The smallest step back of the server's time that the store's default clock follows (ms); a smaller one is the
 * error of the estimate (a reply read late), and held (`SyncLoop.now`).
 */
const FOLLOWED_STEP = 1_000

/** @internal What the sync loop works with, from SyncedStore. */
export interface SyncLoopParts {
  runner: ScriptRunner
  /** Whether the client is a Cluster: a script then carries the keys of one hash slot only. */
  cluster: boolean
  /** ms between ticks. */
  interval: number
  /** Client-side time (the `clock` option); undefined: the Redis server's time, learned from each sync. */
  clock: (() => number) | undefined
  /** Receives the failures of syncs no request waits for. */
  onError: (error: unknown) => void
  failure: FailureMode
  departures: Departures
}

/** @internal SyncedStore's sync loop (see the file's comment). */
export class SyncLoop {
  readonly #parts: SyncLoopParts
  /** Entries marked dirty since the last tick (an entry whose mark was cleared meanwhile is skipped). */
  #dirty: SyncEntry[] = []
  /**
   * The sync timer, started when a key is first marked for a sync (Workers forbid timers in global scope, where a
   * store is usually made); null once stopped.
   */
  #timer: ReturnType<typeof realSetTimeout> | undefined | null
  /** Server time minus the steady clock's epoch ms, learned from each sync (without `clock`). */
  #offset = 0
  /** The latest time `now()` returned without `clock`: it returns no earlier one (see `#learnOffset`). */
  #latest = Number.NEGATIVE_INFINITY

  constructor(parts: SyncLoopParts) {
    this.#parts = parts
  }

  /**
   * The store's time (ms): its `clock`, or else the Redis server's time as last learned, kept on the steady clock
   * (a step of this machine's wall clock does not move it) and never earlier than it read before.
   */
  now(): number {
    const { clock } = this.#parts
    if (clock !== undefined) return Math.floor(clock())
    const now = Math.floor(steadyEpochNow() + this.#offset)
    if (now > this.#latest) this.#latest = now
    return this.#latest
  }

  /** The entries marked for the next tick (some may have been synced meanwhile: their mark is cleared). */
  get marked(): readonly SyncEntry[] {
    return this.#dirty
  }

  /** Lists the entry for the next tick; starts the timer on the first one. */
  markDirty(entry: SyncEntry): void {
    if (entry.dirty) return
    entry.dirty = true
    this.#dirty.push(entry)
    if (this.#timer === undefined) {
      // Real time (unref'd), like the store's Redis calls: a test's fake timers neither run nor hold it.
      const tick = () => {
        if (this.#timer === null) return
        void this.sync().catch(this.#parts.onError)
        this.#timer = realSetTimeout(tick, this.#parts.interval)
      }
      this.#timer = realSetTimeout(tick, this.#parts.interval)
    }
  }

  /** Stops the timer for good: no tick runs and none starts again (`sync` and `flush` still work). */
  stop(): void {
    if (this.#timer) realClearTimeout(this.#timer)
    this.#timer = null
  }

  /** Runs one interval's reconciliation now (SyncedStore's `sync`). Rejects with the first failure. */
  async sync(): Promise<void> {
    const dirty = this.#dirty
    this.#dirty = []
    const ready: SyncEntry[] = []
    const busy: SyncEntry[] = []
    for (const entry of dirty) {
      if (!entry.dirty) continue
      entry.dirty = false
      if (entry.flushing === undefined) ready.push(entry)
      else busy.push(entry)
    }
    const flights = this.#sendAll(ready)
    // A sync in flight may have read before this call: wait for it, then read again.
    if (busy.length > 0) flights.push(this.#resend(busy))
    const results = await Promise.allSettled(flights)
    const failed = results.find((result) => result.status === 'rejected')
    if (failed) throw failed.reason
  }

  /** Sends the entry's unsent counts and reads back the shared ones, unless a sync of it is in flight already. */
  flush(entry: SyncEntry): Promise<void> {
    return entry.flushing ?? this.#send([entry])
  }

  /** Sends an evicted entry's counts once the sync in flight (if any) has ended; failures go to `onError`. */
  flushLater(entry: SyncEntry): void {
    const inFlight = entry.flushing ?? Promise.resolve()
    inFlight
      .catch(() => {})
      .then(() => this.flush(entry))
      .catch(this.#parts.onError)
  }

  async #resend(entries: readonly SyncEntry[]): Promise<void> {
    await Promise.allSettled(entries.map((entry) => entry.flushing))
    // One sent meanwhile (a request past maxPending) read after this sync began: it will do.
    const joined = entries.flatMap((entry) => entry.flushing ?? [])
    const results = await Promise.allSettled([
      ...this.#sendAll(entries.filter((entry) => entry.flushing === undefined)),
      ...joined,
    ])
    const failed = results.find((result) => result.status === 'rejected')
    if (failed) throw failed.reason
  }

  /**
   * Sends `entries` (none in flight) in scripts of at most BATCH_KEYS keys; on a Cluster, each script holds the
   * keys of one hash slot only. Returns one promise per script.
   */
  #sendAll(entries: readonly SyncEntry[]): Promise<void>[] {
    if (entries.length === 0) return []
    const groups = this.#parts.cluster ? bySlot(entries) : [entries]
    const flights: Promise<void>[] = []
    for (const group of groups) {
      let batch: SyncEntry[] = []
      let keys = 0
      for (const entry of group) {
        const size = entry.keys.length + (entry.recordKey === undefined ? 0 : 1)
        if (keys > 0 && keys + size > BATCH_KEYS) {
          flights.push(this.#send(batch))
          batch = []
          keys = 0
        }
        batch.push(entry)
        keys += size
      }
      flights.push(this.#send(batch))
    }
    return flights
  }

  /**
   * One script, one round trip: adds the unsent counts of `entries` to the shared ones and reads these back, with
   * the override records of the entries that have one to read (after the counters' keys). The entries' keys must
   * share one Cluster slot on a Cluster client.
   */
  #send(entries: readonly SyncEntry[]): Promise<void> {
    const { clock, runner, failure } = this.#parts
    const keys: string[] = []
    const records: string[] = []
    const args: string[] = [clock === undefined ? '-1' : String(Math.floor(clock()))]
    for (const entry of entries) {
      if (entry.recordKey !== undefined) {
        records.push(entry.recordKey)
        entry.recordChanged = false
      }
      const { rules } = entry.target
      const sent = entry.unsent
      entry.unsent = entry.sent
      entry.sent = sent
      entry.sentCost = entry.unacked
      for (let i = 0; i < rules.length; i++) {
        const { win, curr, prev } = sent[i]!
        keys.push(entry.keys[i]!)
        args.push(`${rules[i]!.windowMs}:${Number.isFinite(win) ? win : 0}:${curr}:${prev}`)
      }
    }
    const started = steadyEpochNow()
    const counters = keys.length
    const flight = (
      records.length === 0
        ? runner.run(SYNC_SCRIPT, keys, args)
        : runner.run(SYNC_RECORDS_SCRIPT, [...keys, ...records], args)
    )
      .then((reply) => syncReplies(reply, counters, records.length))
      .then(
        (replies) => {
          if (clock === undefined) this.#learnOffset(Number(replies[0]), started)
          const now = this.now()
          let at = 1
          let record = 1 + 3 * counters
          for (const entry of entries) {
            entry.flushing = undefined
            if (entry.recordKey !== undefined) readRecord(entry, replies[record++])
            at = this.#apply(entry, replies, at, now)
          }
          failure.synced()
        },
        (error: unknown) => {
          for (const entry of entries) {
            entry.flushing = undefined
            this.#restore(entry)
          }
          failure.failed(error)
          throw error
        },
      )
    for (const entry of entries) entry.flushing = flight
    return flight
  }

  /**
   * Learns the server's time from a reply: `server` (ms) read between `sent` and now (steady epoch ms), taken as
   * read halfway. NOTE: the estimate is off by up to half the round trip, and more when the reply is read late (a
   * busy event loop): from one sync to the next it moved back by up to 9.5 ms, and a decision after it
   * read an earlier time than one before it. `now()` holds such a step back (it reads the same time until the
   * steady clock has caught up); one of more than `FOLLOWED_STEP` is the server's clock set back, and is followed
   * (each key still keeps its newer window: entry.ts, `windowOf`).
   */
  #learnOffset(server: number, sent: number): void {
    const received = steadyEpochNow()
    this.#offset = server - (sent + received) / 2
    const now = Math.floor(received + this.#offset)
    if (now < this.#latest - FOLLOWED_STEP) this.#latest = now
  }

  /** Takes the entry's part of a sync reply, from index `at`; returns the index after it. */
  #apply(entry: SyncEntry, replies: readonly unknown[], at: number, now: number): number {
    const { views, sent } = entry
    for (let i = 0; i < views.length; i++) {
      const view = views[i]!
      view.win = Number(replies[at++])
      view.curr = Number(replies[at++])
      view.prev = Number(replies[at++])
      clearCounts(sent[i]!)
    }
    entry.unacked -= entry.sentCost
    entry.sentCost = 0
    entry.syncedAt = now
    if (!entry.held) this.#parts.departures.settle(entry)
    return at
  }

  /**
   * After a failed sync: its counts go back with the unsent ones, to be sent again with the next sync (a reply
   * lost after the script ran counts them twice: the error errs towards denying).
   */
  #restore(entry: SyncEntry): void {
    const { unsent, sent } = entry
    for (let i = 0; i < sent.length; i++) {
      mergeCounts(unsent[i]!, sent[i]!)
      clearCounts(sent[i]!)
    }
    entry.sentCost = 0
    this.markDirty(entry)
  }
}

/** The entries grouped by Cluster slot. */
function bySlot(entries: readonly SyncEntry[]): Iterable<SyncEntry[]> {
  const groups = new Map<number, SyncEntry[]>()
  for (const entry of entries) {
    const group = groups.get(entry.slot)
    if (group === undefined) groups.set(entry.slot, [entry])
    else group.push(entry)
  }
  return groups.values()
}

/** The sync script's reply, checked: the server time, three integers per counters key, then one per record. */
function syncReplies(reply: unknown, keys: number, records: number): readonly unknown[] {
  if (!Array.isArray(reply) || reply.length !== 1 + 3 * keys + records) {
    throw new RateLimitError(
      'ERR_RATEWINDOW_STORE',
      `Unexpected reply from the sync script: ${String(reply)}`,
    )
  }
  return reply
}
