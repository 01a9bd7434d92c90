/**
 * Whether a gateway client is behind on reading, for `LimitedConnection.attach`: its outgoing buffer over its
 * bound (Socket.IO: packets in `conn.writeBuffer`; ws: `bufferedAmount` bytes), counting the `exception` replies
 * Nest is about to queue. Nest's exception filter answers every refused message, a few microtasks after the
 * guard refused it: the messages of one read (a flood is thousands) are all decided before the first of their
 * replies is queued, so the buffer alone would show nothing until the whole read was answered.
 */

import type { MessageRefusal } from '@ratewindow/ws/engine'
import { refusalMessage } from '@ratewindow/ws/engine'

/** The parts of a gateway client the backlog reads: a Socket.IO socket's connection, a ws socket's buffer. */
export interface BufferedClient {
  conn?: { writeBuffer: unknown[] }
  bufferedAmount?: number
}

/** The bounds of the outgoing buffer, per platform. */
export interface BacklogBounds {
  /** Socket.IO: packets. */
  maxWriteBuffer: number
  /** ws: bytes. */
  maxBufferedAmount: number
}

/** Bytes of a ws frame's header for a payload under 64 KiB, server to client (unmasked). */
const FRAME_HEADER = 4

export class ClientBacklog {
  readonly #buffered: () => number
  readonly #bound: number
  readonly #replySize: (refusal: MessageRefusal) => number
  /** This turn of the event loop: the buffer when it was first read, and the replies told since. */
  #turn: { buffered: number; told: number } | undefined

  constructor(client: BufferedClient, bounds: BacklogBounds) {
    const { conn } = client
    if (conn !== undefined) {
      this.#buffered = () => conn.writeBuffer.length
      this.#bound = bounds.maxWriteBuffer
      this.#replySize = () => 1
    } else {
      this.#buffered = () => client.bufferedAmount ?? 0
      this.#bound = bounds.maxBufferedAmount
      // What Nest's filter sends a ws client: `{ event: 'exception', data }` as JSON.
      this.#replySize = (refusal) =>
        Buffer.byteLength(JSON.stringify({ event: 'exception', data: refusalMessage(refusal) })) +
        FRAME_HEADER
    }
  }

  /** Whether the buffer, with the replies told this turn, is over its bound. */
  backlogged(): boolean {
    const turn = this.#current()
    return turn.buffered + turn.told > this.#bound
  }

  /** A refused message: Nest queues its `exception` reply before the next turn. */
  told(refusal: MessageRefusal): void {
    this.#current().told += this.#replySize(refusal)
  }

  /**
   * NOTE: the buffer is read once a turn, and the replies of the turn added to it, so that a reply is not counted
   * twice (told, then queued in the same turn); by the next turn every one of them is in the buffer, or sent.
   */
  #current(): { buffered: number; told: number } {
    if (this.#turn === undefined) {
      this.#turn = { buffered: this.#buffered(), told: 0 }
      setImmediate(() => {
        this.#turn = undefined
      })
    }
    return this.#turn
  }
}
