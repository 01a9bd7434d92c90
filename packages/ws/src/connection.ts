/**
 * One admitted connection: its slot (renewed while it is open, given back when it closes) and its messages, each
 * decided by the message limiters and delivered in the order it arrived. At most `maxPending` messages wait for
 * their decisions; one more is refused at once. Nothing is queued beyond that bound, refusal replies included
 * (replies.ts).
 */
import type {
  Awaitable,
  ConcurrencyLimiter,
  ConcurrencyResult,
  RateLimiter,
  RateLimitResult,
} from '@ratewindow/core'
import type { MessageRefusal, WebSocketConfig } from './options.js'
import { closeReasonOf, messageRefusal } from './refusal.js'
import { RefusalReplies } from './replies.js'

/** A message limiter and the key it counts this connection's messages under. */
export interface MessageCounter {
  limiter: RateLimiter
  key: string
  /** The per-key limiter (a message may name another key for it: Socket.IO's `socketKey`). */
  perKey: boolean
}

/** How the binding closes its connection: code 1008, the reason already cut to 123 bytes, and why. */
export type Closer = (code: number, reason: string, refusal: MessageRefusal) => void

/**
 * What a binding hears of a refused message: always, so that it can settle what waits on it; `reply` says
 * whether to answer the client now (at most one a second, none while it is not reading).
 */
export type Teller = (refusal: MessageRefusal, reply: boolean) => void

/** What one message costs and, for the per-key limit, the key it counts under, when the binding knows better. */
export interface ReceiveOptions {
  /** The per-key limit's key for this message (the connection's otherwise). */
  key?: Awaitable<string>
  /** The cost, in place of the `cost` option's. */
  cost?: number
}

/** A message's decision: delivered (one result per counter, in counter order), or refused with why. */
type Verdict = { allowed: true; results: RateLimitResult[] } | { allowed: false; refusal: MessageRefusal }

interface Waiting {
  verdict: Verdict | undefined
  deliver: () => void
  tell: Teller
}

/** The close reason of a connection whose slot was taken by another while it renewed it. */
const SLOT_LOST: MessageRefusal = messageRefusal('limit', 0)

export class LimitedConnection<Msg> {
  /** The client's key, from the upgrade request. */
  readonly key: string
  readonly #config: WebSocketConfig<unknown, Msg>
  readonly #counters: readonly MessageCounter[]
  readonly #slots: ConcurrencyLimiter | undefined
  #slot: ConcurrencyResult | undefined
  #renewal: ReturnType<typeof setTimeout> | undefined
  /** Messages waiting for their decision, in arrival order, and those decided behind one still waiting. */
  readonly #waiting: Waiting[] = []
  #closer: Closer | undefined
  /** Whether the client is behind on reading: its outgoing buffer over the binding's bound. */
  #backlogged: () => boolean = () => false
  readonly #replies: RefusalReplies
  #closed = false

  constructor(
    key: string,
    config: WebSocketConfig<unknown, Msg>,
    counters: readonly MessageCounter[],
    slots: ConcurrencyLimiter | undefined,
    slot: ConcurrencyResult | undefined,
  ) {
    this.key = key
    this.#config = config
    this.#counters = counters
    this.#slots = slots
    this.#slot = slot
    this.#replies = new RefusalReplies(config.maxUnreadRefusals, config.clock)
  }

  /** Messages waiting for their decision now (at most `maxPending`). */
  get pending(): number {
    return this.#waiting.length
  }

  /** Whether the connection is over (closed by either side, or its upgrade failed): its slot is given back. */
  get closed(): boolean {
    return this.#closed
  }

  /**
   * The connection is open: `closer` is how to close it from now on, `backlogged` whether its client is behind
   * on reading (its outgoing buffer over the binding's bound). Its slot is renewed from the first attach on;
   * until then (an upgrade under way) the first lease holds.
   */
  attach(closer: Closer, backlogged?: () => boolean): void {
    const first = this.#closer === undefined
    this.#closer = closer
    if (backlogged !== undefined) this.#backlogged = backlogged
    if (first) this.#renewLater()
  }

  /**
   * One message: `deliver` runs when its limits admit it, after every message that arrived before it was
   * delivered or refused; `tell` runs when it is refused and `onLimit` is `'drop'`, saying whether to answer.
   */
  receive(message: Msg, deliver: () => void, tell: Teller, options: ReceiveOptions = {}): void {
    if (this.#closed) return
    if (this.#counters.length === 0) {
      deliver()
      return
    }
    const cost = options.cost ?? this.#costOf(message)
    if (cost === undefined) return
    if (this.#waiting.length >= this.#config.maxPending) {
      this.#refuse(messageRefusal('busy', 0), tell)
      return
    }
    const waiting: Waiting = { verdict: undefined, deliver, tell }
    this.#waiting.push(waiting)
    this.#decide(cost, options.key).then(
      (verdict) => this.#settle(waiting, verdict),
      (error) => {
        // A cost above what the rules accept (ERR_RATEWINDOW_COST_EXCEEDS_LIMIT), a key function that threw:
        // refused, and reported.
        this.#config.onError(error)
        this.#settle(waiting, { allowed: false, refusal: messageRefusal('limit', 0) })
      },
    )
  }

  /**
   * A message the limits do not count (a Socket.IO acknowledgement, a namespace DISCONNECT), delivered in its
   * turn: at once when none waits, else after those that arrived before it. When `maxPending` wait already (a
   * flood), it is dropped.
   */
  pass(deliver: () => void): void {
    if (this.#closed || this.#waiting.length >= this.#config.maxPending) return
    if (this.#waiting.length === 0) deliver()
    else this.#waiting.push({ verdict: { allowed: true, results: [] }, deliver, tell: () => {} })
  }

  /**
   * Whether to answer a refusal now: at most one reply a second (`paced`), none while the client is not reading;
   * `maxUnreadRefusals` refusals in a row while it is not reading close the connection (1008), and this answers
   * false. For refusals decided by the binding (a Socket.IO namespace past its bound); those of `receive` come
   * through its `tell`.
   */
  mayReply(refusal: MessageRefusal, paced = true): boolean {
    if (this.#closed) return false
    const verdict = this.#replies.next(this.#backlogged(), paced)
    if (verdict === 'close') this.#closeFor(refusal)
    return verdict === 'reply'
  }

  /**
   * The connection is over: its slot is given back, its renewal stopped, and the messages still waiting are
   * dropped (those already admitted give their charge back). Idempotent.
   */
  close(): void {
    if (this.#closed) return
    this.#closed = true
    clearTimeout(this.#renewal)
    void this.#slot?.release()
    this.#slot = undefined
    for (const { verdict } of this.#waiting.splice(0)) if (verdict?.allowed) this.#giveBack(verdict.results)
  }

  #costOf(message: Msg): number | undefined {
    const { cost } = this.#config
    if (typeof cost === 'number') return cost
    try {
      const value = cost(message)
      if (Number.isSafeInteger(value) && value >= 0) return value
      throw new TypeError(
        `\`cost\` must return a whole number >= 0; returned ${String(value)}. The message was dropped.`,
      )
    } catch (error) {
      this.#config.onError(error)
      return undefined
    }
  }

  /** Every limiter decides at once; a message one refuses is given back to the others (all or nothing). */
  async #decide(cost: number, perKey: Awaitable<string> | undefined): Promise<Verdict> {
    const keyed = perKey === undefined ? undefined : await perKey
    if (keyed !== undefined && typeof keyed !== 'string')
      throw new TypeError(`A message's key must be a string; got ${typeof keyed}. The message was refused.`)
    const results = await Promise.all(
      this.#counters.map(({ limiter, key, perKey }) =>
        limiter.limit(perKey && keyed !== undefined ? keyed : key, { cost }),
      ),
    )
    const refused = results.find((result) => !result.allowed)
    if (refused === undefined) return { allowed: true, results }
    this.#giveBack(results)
    const reason = refused.source === 'policy' ? 'unavailable' : refused.source === 'shed' ? 'busy' : 'limit'
    return { allowed: false, refusal: messageRefusal(reason, refused.retryAfter) }
  }

  /** A decision arrived: the decided messages at the head of the line go, in arrival order. */
  #settle(waiting: Waiting, verdict: Verdict): void {
    if (this.#closed) {
      if (verdict.allowed) this.#giveBack(verdict.results)
      return
    }
    waiting.verdict = verdict
    const line = this.#waiting
    while (line.length > 0 && line[0]!.verdict !== undefined && !this.#closed) {
      const next = line.shift()!
      const decided = next.verdict!
      if (!decided.allowed) this.#refuse(decided.refusal, next.tell)
      else {
        try {
          next.deliver()
        } catch (error) {
          // The application's handler threw: as it would without the limiter, out of the limiter's way.
          queueMicrotask(() => {
            throw error
          })
        }
      }
    }
  }

  #refuse(refusal: MessageRefusal, tell: Teller): void {
    if (this.#config.close) {
      this.#closeFor(refusal)
      return
    }
    const reply = this.mayReply(refusal)
    // A connection closed for not reading settles what waits on its messages through its closer.
    if (!this.#closed) tell(refusal, reply)
  }

  /** Closes with 1008 and the reason (`onLimit: 'close'`, or a slot taken while it was renewed). */
  #closeFor(refusal: MessageRefusal): void {
    const closer = this.#closer
    this.close()
    closer?.(1008, closeReasonOf(this.#config.closeReason, refusal), refusal)
  }

  /** Gives back the admitted ones of `results` (one per counter, in counter order). Never rejects. */
  #giveBack(results: readonly RateLimitResult[]): void {
    for (const [i, result] of results.entries())
      if (result.allowed) void this.#counters[i]!.limiter.refund(result)
  }

  /**
   * Every half lease, the slot is given back and taken again, so that it never runs out while the connection is
   * open. When another connection of the key took it meanwhile, this one is over the limit and closes (1008).
   */
  #renewLater(): void {
    const slots = this.#slots
    if (slots === undefined || this.#closed) return
    this.#renewal = setTimeout(() => void this.#renew(slots), slots.leaseMs / 2)
    this.#renewal.unref?.()
  }

  async #renew(slots: ConcurrencyLimiter): Promise<void> {
    await this.#slot?.release()
    if (this.#closed) return
    const slot = await slots.acquire(this.key)
    if (this.#closed) {
      void slot.release()
      return
    }
    this.#slot = slot
    if (!slot.allowed && slot.source === 'store') return this.#closeFor(SLOT_LOST)
    this.#renewLater()
  }
}
