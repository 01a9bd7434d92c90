/**
 * The gate of one Engine.IO connection: its messages are read into whole Socket.IO packets before Socket.IO
 * sees them, and each event and namespace CONNECT is decided by the connection's limits. A refused packet never
 * reaches Socket.IO, so no listener of any kind (`onAny`, `prependAny`, `socket.use`, the event's) runs for it
 * (`onAny` ran before `socket.use`, where the limits used to be). A refused handshake gets a session
 * of its own that answers its first CONNECT with a CONNECT error, which the client reads as `connect_error`.
 */
import type { Socket } from 'socket.io'
import type { LimitedConnection } from './connection.js'
import type { MessageRefusal } from './options.js'
import { messageRefusal } from './refusal.js'
import type { EngineConnection, Packet, PacketCodec, SocketIoMessage } from './socket-io-packets.js'
import { PACKET } from './socket-io-packets.js'

/** What every gate of a server shares: the server's codec and the binding's options, resolved. */
export interface GateSettings {
  codec: PacketCodec
  errorEvent: string
  errorMessage: (refusal: MessageRefusal) => unknown
  /** Packets waiting in the connection's write buffer past which refusals go unanswered. */
  maxWriteBuffer: number
  /** Namespaces a connection may have joined (or asked for) at once. */
  maxNamespaces: number
  /** The per-key limit's key, from a connected socket. */
  socketKey: ((socket: Socket) => string | Promise<string>) | undefined
}

/** A CONNECT past the namespace bound: refused by the binding, no limit's wait to tell. */
const NAMESPACE_BOUND: MessageRefusal = messageRefusal('limit', 0)

/** The cost function never sees a CONNECT: it costs 1. This stands for it in `receive`. */
const CONNECT: SocketIoMessage = { namespace: '/', event: '', args: [], ack: false }

export class SocketIoGate {
  readonly #conn: EngineConnection
  readonly #limited: LimitedConnection<SocketIoMessage>
  readonly #settings: GateSettings
  /** The connected socket of each namespace this connection joined. */
  readonly #sockets = new Map<string, Socket>()
  /** Namespaces joined or asked for (a join refused by Socket.IO stays counted), less those left. */
  readonly #namespaces = new Set<string>()
  readonly #keys = new WeakMap<Socket, Promise<string>>()

  constructor(conn: EngineConnection, limited: LimitedConnection<SocketIoMessage>, settings: GateSettings) {
    this.#conn = conn
    this.#limited = limited
    this.#settings = settings
    limited.attach(
      (_code, _reason, refusal) => this.#close(refusal),
      () => conn.writeBuffer.length > settings.maxWriteBuffer,
    )
    readPackets(conn, settings.codec, (packet, pass) => this.#route(packet, pass))
  }

  /** A socket of this connection connected to a namespace (after every middleware). */
  joined(socket: Socket): void {
    const name = socket.nsp.name
    this.#sockets.set(name, socket)
    this.#namespaces.add(name)
    socket.once('disconnect', () => {
      this.#sockets.delete(name)
      this.#namespaces.delete(name)
    })
  }

  #route(packet: Packet, pass: () => void): void {
    if (packet.type === PACKET.CONNECT) this.#connect(packet, pass)
    else if (packet.type === PACKET.EVENT || packet.type === PACKET.BINARY_EVENT) this.#event(packet, pass)
    // Acknowledgements and DISCONNECTs count nothing, and keep their place after the events before them.
    else this.#limited.pass(pass)
  }

  #event(packet: Packet, pass: () => void): void {
    const data = Array.isArray(packet.data) ? packet.data : []
    const message = {
      namespace: packet.nsp,
      event: String(data[0]),
      args: data.slice(1),
      ack: packet.id != null,
    }
    const socket = this.#sockets.get(packet.nsp)
    const key = socket === undefined ? undefined : this.#keyOf(socket)
    this.#limited.receive(
      message,
      pass,
      (refusal, reply) => {
        if (reply) this.#tell(packet, refusal)
      },
      { key },
    )
  }

  /** A CONNECT counts 1 against the message limits (the connection's key), then the namespace bound. */
  #connect(packet: Packet, pass: () => void): void {
    const { nsp } = packet
    this.#limited.receive(
      CONNECT,
      () => {
        const { maxNamespaces } = this.#settings
        if (this.#namespaces.has(nsp) || this.#namespaces.size < maxNamespaces) {
          this.#namespaces.add(nsp)
          return pass()
        }
        if (this.#limited.mayReply(NAMESPACE_BOUND, false))
          this.#write(
            connectError(nsp, 'too_many_namespaces', { error: 'too_many_namespaces', limit: maxNamespaces }),
          )
      },
      (refusal, reply) => {
        if (reply) this.#write(connectError(nsp, 'rate_limited', this.#settings.errorMessage(refusal)))
      },
      { cost: 1 },
    )
  }

  /** A refused event: its acknowledgement's answer when it asked for one, else the error event. */
  #tell(packet: Packet, refusal: MessageRefusal): void {
    const answer = this.#settings.errorMessage(refusal)
    const { nsp, id } = packet
    this.#write(
      id == null
        ? { type: PACKET.EVENT, nsp, data: [this.#settings.errorEvent, answer] }
        : { type: PACKET.ACK, nsp, id, data: [answer] },
    )
  }

  #keyOf(socket: Socket): Promise<string> | undefined {
    const { socketKey } = this.#settings
    if (socketKey === undefined) return undefined
    let key = this.#keys.get(socket)
    if (key === undefined) {
      key = Promise.resolve().then(() => socketKey(socket))
      // A key function that throws refuses each message of the socket (reported to `onError` then); a message
      // refused before it waited for its key (busy) must not leave the rejection unhandled.
      key.catch(() => {})
      this.#keys.set(socket, key)
    }
    return key
  }

  /**
   * `onLimit: 'close'`, a slot lost, or a client that does not read: each namespace's socket gets the error
   * event, then the connection is disconnected. Admitted events reach their listeners two ticks after they were
   * passed on (Socket.IO's decoder, then its middlewares): the disconnect waits for them.
   */
  #close(refusal: MessageRefusal): void {
    const sockets = [...this.#sockets.values()]
    for (const socket of sockets) socket.emit(this.#settings.errorEvent, this.#settings.errorMessage(refusal))
    setImmediate(() => {
      if (sockets[0] !== undefined) sockets[0].disconnect(true)
      else this.#conn.close()
    })
  }

  #write(packet: Packet): void {
    writePacket(this.#conn, this.#settings.codec, packet)
  }
}

/** How long a refused handshake's session waits for the client's first CONNECT, ms. */
export const REFUSED_SESSION_MS = 5_000

/**
 * The session of a refused handshake: its first CONNECT is answered with a CONNECT error (the client's
 * `connect_error`: `err.message` `'rate_limited'`, `err.data` the refusal) and the session closes; anything else,
 * or no CONNECT within `REFUSED_SESSION_MS`, closes it at once. Nothing of it reaches a namespace.
 */
export function refuseSession(conn: EngineConnection, codec: PacketCodec, data: unknown): void {
  const timer = setTimeout(() => conn.close(true), REFUSED_SESSION_MS)
  timer.unref?.()
  conn.once('close', () => clearTimeout(timer))
  let answered = false
  readPackets(conn, codec, (packet) => {
    if (answered) return
    answered = true
    if (packet.type !== PACKET.CONNECT) return void conn.close(true)
    // Closed once the answer is sent: a polling session closed before (`close()` waits for the client's next
    // poll, 30 s at most) would hold its process open that long.
    writePacket(conn, codec, connectError(packet.nsp, 'rate_limited', data), () => conn.close(true))
  })
}

function connectError(nsp: string, message: string, data: unknown): Packet {
  return { type: PACKET.CONNECT_ERROR, nsp, data: { message, data } }
}

/** Writes a packet (one message, or several for binary data); `sent` runs once its last message is sent. */
function writePacket(conn: EngineConnection, codec: PacketCodec, packet: Packet, sent?: () => void): void {
  const pieces = codec.encode(packet)
  for (const [i, piece] of pieces.entries()) conn.write(piece, {}, i === pieces.length - 1 ? sent : undefined)
}

/**
 * Reads a connection's messages into whole packets before Socket.IO does: `onPacket` gets each packet and how to
 * pass its messages on to Socket.IO (a binary packet is several messages, always passed on together). A message
 * the decoder refuses is passed on at once: Socket.IO's own decoder then refuses it and closes the connection.
 */
function readPackets(
  conn: EngineConnection,
  codec: PacketCodec,
  onPacket: (packet: Packet, pass: () => void) => void,
): void {
  const emit = conn.emit
  const passOn = (pieces: unknown[]) => {
    for (const piece of pieces) {
      emit.call(conn, 'data', piece)
      emit.call(conn, 'message', piece)
    }
  }
  let pieces: unknown[] = []
  let decoder = codec.decoder()
  const listen = () =>
    decoder.on('decoded', (packet) => {
      const whole = pieces
      pieces = []
      onPacket(packet, () => passOn(whole))
    })
  listen()
  conn.once('close', () => decoder.destroy())
  // NOTE: Engine.IO has no hook before its 'data' listeners (Socket.IO's among them): the connection's own emit
  // is wrapped, as `ws`'s is in index.ts. Engine.IO emits 'message' right after 'data', with the same message.
  conn.emit = function gatedEmit(
    this: EngineConnection,
    event: string | symbol,
    ...args: unknown[]
  ): boolean {
    if (event === 'message') return true
    if (event !== 'data') return emit.call(this, event, ...args)
    pieces.push(args[0])
    try {
      decoder.add(args[0])
    } catch {
      const rejected = pieces
      pieces = []
      decoder.destroy()
      decoder = codec.decoder()
      listen()
      passOn(rejected)
    }
    return true
  }
}
