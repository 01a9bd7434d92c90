/**
 * Socket.IO handshakes between the limits' decision and Engine.IO's connection. What a handshake took (an
 * admitted one's connection slot, a refused one's place among the refused sessions) is given back on every
 * path that ends it without a connection: Engine.IO's `connection_error`, and the handshake's response closing
 * first, which is how Engine.IO drops some requests without an event (an upgrade with `transport=polling`, one
 * whose `Sec-WebSocket-Key` `ws` rejects) and how a client that left shows.
 */
import { type IncomingMessage, ServerResponse } from 'node:http'
import { socketClosed } from '@ratewindow/core/adapter'
import type { LimitedConnection } from './connection.js'
import type { MessageRefusal } from './options.js'
import type { RawSocket } from './refusal.js'
import type { EngineConnection, SocketIoMessage } from './socket-io-packets.js'

/** A handshake the limits decided: admitted (its connection's limits) or refused (why, for its session). */
export type Handshake =
  | { admitted: LimitedConnection<SocketIoMessage> }
  | { refused: MessageRefusal; admitted?: undefined }

interface Pending {
  handshake: Handshake
  /** Stops watching the response for its close. */
  unwatch: () => void
}

export class SocketIoHandshakes {
  readonly #maxRefused: number
  readonly #pending = new WeakMap<IncomingMessage, Pending>()
  /** Handshakes whose response closed before Engine.IO opened a connection for them: given back already. */
  readonly #abandoned = new WeakSet<IncomingMessage>()
  /** Refused handshakes on their way to a session, and refused sessions open. */
  #refused = 0

  /** @param maxRefused refused handshakes that may be on their way or open at once */
  constructor(maxRefused: number) {
    this.#maxRefused = maxRefused
  }

  /**
   * Holds `handshake` until Engine.IO opens its connection (`opened`) or refuses it (`failed`), or its response
   * closes first. A refused one past `maxRefused` is not held: false, to be refused in HTTP terms.
   */
  hold(request: IncomingMessage, response: unknown, handshake: Handshake): boolean {
    if (handshake.admitted === undefined) {
      if (this.#refused >= this.#maxRefused) return false
      this.#refused++
    }
    const unwatch = whenClosed(response, () => {
      if (this.#release(request)) this.#abandoned.add(request)
    })
    this.#pending.set(request, { handshake, unwatch })
    return true
  }

  /**
   * Engine.IO opened `connection`: its handshake, given back when the connection closes; `'gone'` when its
   * response closed before (what it took is back already: the connection is to be closed); undefined when the
   * limits did not decide it.
   */
  opened(connection: EngineConnection): Handshake | 'gone' | undefined {
    const { request } = connection
    const pending = this.#pending.get(request)
    if (pending === undefined) return this.#abandoned.has(request) ? 'gone' : undefined
    this.#pending.delete(request)
    pending.unwatch()
    const { handshake } = pending
    connection.once('close', () => {
      if (handshake.admitted !== undefined) handshake.admitted.close()
      else this.#refused--
    })
    return handshake
  }

  /** Engine.IO refused the handshake of `request` (`connection_error`): what it took is given back. */
  failed(request: IncomingMessage): void {
    this.#release(request)
  }

  #release(request: IncomingMessage): boolean {
    const pending = this.#pending.get(request)
    if (pending === undefined) return false
    this.#pending.delete(request)
    pending.unwatch()
    if (pending.handshake.admitted !== undefined) pending.handshake.admitted.close()
    else this.#refused--
    return true
  }
}

/**
 * Runs `listener` once the handshake's response is closed (answered, or its client gone), at once if it is: a
 * polling request's `ServerResponse`, or the socket of an upgrade (Engine.IO's stand-in response holds it).
 */
function whenClosed(response: unknown, listener: () => void): () => void {
  if (response instanceof ServerResponse) {
    if (response.closed) {
      queueMicrotask(listener)
      return () => {}
    }
    response.once('close', listener)
    return () => response.removeListener('close', listener)
  }
  return socketClosed((response as { socket?: RawSocket }).socket, listener)
}
