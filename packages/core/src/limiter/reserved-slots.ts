/**
 * The slots this process's waiters hold, per key, and the order in which the slots of waiters that leave go back.
 * GCRA and the token bucket give a slot back only while it is the last one reserved: one number per
 * key cannot hold a gap. So a waiter that leaves while a later waiter of this process still waits on the same key
 * is given back after that one, latest first: waiters leaving earliest first still give every slot back. A slot
 * that another process reserved after them keeps them empty: never two calls on one slot.
 */
import type { RateLimitResult } from '../result.js'

/** One waiter's reserved slot. */
export interface HeldSlot {
  readonly result: RateLimitResult
  /** True while its waiter waits; false once it left and its slot waits to be given back. */
  waiting: boolean
}

/** @internal The reserved slots of one limiter's waiters, by store and key. */
export class ReservedSlots {
  readonly #giveBack: (result: RateLimitResult) => Promise<void>
  /** Per store and key: the slots held, in slot order (then arrival). */
  readonly #byKey = new Map<string, HeldSlot[]>()
  /** Per store and key: the give-backs under way, one after the other (each sees the state the last one left). */
  readonly #turns = new Map<string, Promise<void>>()

  /** `giveBack`: the limiter's refund of a result; it never rejects for a store failure. */
  constructor(giveBack: (result: RateLimitResult) => Promise<void>) {
    this.#giveBack = giveBack
  }

  /** Holds the slot of `result` (one with a reserved slot) while its waiter waits. */
  hold(result: RateLimitResult): HeldSlot {
    const slot: HeldSlot = { result, waiting: true }
    const key = keyOf(result)
    const held = this.#byKey.get(key)
    if (held === undefined) {
      this.#byKey.set(key, [slot])
      return slot
    }
    let i = held.length
    while (i > 0 && held[i - 1]!.result.at > result.at) i--
    held.splice(i, 0, slot)
    return slot
  }

  /**
   * Its waiter was served: the slot stays spent. The slots given up before it are sent back now if no waiter of
   * this process waits after them (the store decides what they are worth: nothing while slots are reserved).
   */
  served(slot: HeldSlot): void {
    const key = keyOf(slot.result)
    const held = this.#byKey.get(key)!
    held.splice(held.indexOf(slot), 1)
    void this.#flush(key, held)
  }

  /**
   * Its waiter left: its slot goes back now, or, while a later waiter of this process waits on the key (whose
   * slot would keep it from the store), after that one. Resolves once given back or put off.
   */
  left(slot: HeldSlot): Promise<void> {
    slot.waiting = false
    const key = keyOf(slot.result)
    return this.#flush(key, this.#byKey.get(key)!)
  }

  /** Gives back the slots at the end of `held` whose waiters left, latest first, after the give-backs under way. */
  #flush(key: string, held: HeldSlot[]): Promise<void> {
    const leaving: RateLimitResult[] = []
    while (held.length > 0 && !held[held.length - 1]!.waiting) leaving.push(held.pop()!.result)
    if (held.length === 0) this.#byKey.delete(key)
    if (leaving.length === 0) return Promise.resolve()
    const turn = (this.#turns.get(key) ?? Promise.resolve()).then(async () => {
      for (const result of leaving) await this.#giveBack(result).catch(ignore)
    })
    this.#turns.set(key, turn)
    void turn.then(() => {
      if (this.#turns.get(key) === turn) this.#turns.delete(key)
    })
    return turn
  }
}

/** Slots of the store and of the fallback are on different states, and so in different queues. */
function keyOf(result: RateLimitResult): string {
  return `${result.source}:${result.key}`
}

// A refund rejects only for a bad key or cost, which a result the limiter answered cannot have.
const ignore = (): void => {}
