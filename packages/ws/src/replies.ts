/**
 * When a refused message is answered. A client that floods and never reads would otherwise have every refusal
 * reply buffered on the server, without bound: a connection gets at
 * most one reply a second, none while its outgoing buffer is over the binding's bound (it is not reading), and
 * after `maxUnreadRefusals` refusals in that state it is closed.
 */
import { WEBSOCKET_DEFAULTS } from './options.js'

/** What to do with one refusal: answer it, say nothing, or close the connection (1008). */
export type ReplyVerdict = 'reply' | 'quiet' | 'close'

export class RefusalReplies {
  readonly #maxUnread: number
  readonly #clock: () => number
  /** When the last reply went out (clock ms), or none yet. */
  #lastReply: number | undefined
  /** Refusals in a row while the client was not reading. */
  #unread = 0

  constructor(maxUnread: number, clock: () => number) {
    this.#maxUnread = maxUnread
    this.#clock = clock
  }

  /**
   * One refusal. `backlogged`: the connection's outgoing buffer is over its bound. `paced: false` for a refusal
   * that the message limits already paced (a namespace past its bound): answered unless backlogged.
   */
  next(backlogged: boolean, paced = true): ReplyVerdict {
    if (backlogged) return ++this.#unread >= this.#maxUnread ? 'close' : 'quiet'
    this.#unread = 0
    if (!paced) return 'reply'
    const now = this.#clock()
    // NOTE: a clock that steps back (a test's, or one that is not steady) answers again at once rather than never.
    const last = this.#lastReply
    if (last !== undefined && now >= last && now - last < WEBSOCKET_DEFAULTS.replyInterval) return 'quiet'
    this.#lastReply = now
    return 'reply'
  }
}
