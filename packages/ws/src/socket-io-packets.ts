/**
 * What the Socket.IO binding reads of Socket.IO and Engine.IO: packets (protocol 5), the server's codec, an
 * Engine.IO connection. Narrowed to the members used, all present since Socket.IO 4.6 (engine.io 6.4); some are
 * marked private in Socket.IO's types (`_parser`, `encoder`, `_nsps`, the engine's `clients`).
 */
import type { IncomingMessage } from 'node:http'

/** Socket.IO's packet types, as socket.io-parser numbers them (protocol 5). */
export const PACKET = {
  CONNECT: 0,
  DISCONNECT: 1,
  EVENT: 2,
  ACK: 3,
  CONNECT_ERROR: 4,
  BINARY_EVENT: 5,
  BINARY_ACK: 6,
} as const

/** One Socket.IO packet, decoded (or to encode). */
export interface Packet {
  type: number
  nsp: string
  data?: unknown
  id?: number
}

/** One Socket.IO event as it arrives, before any listener: what `cost` is given. */
export interface SocketIoMessage {
  /** The namespace the event was sent to, e.g. `'/'` or `'/chat'`. */
  namespace: string
  event: string
  /** The event's arguments (an acknowledgement is not among them: see `ack`). */
  args: unknown[]
  /** Whether the client asked for an acknowledgement. */
  ack: boolean
}

/** The parts of an Engine.IO connection (`io.engine`'s sockets) the binding uses. */
export interface EngineConnection {
  request: IncomingMessage
  /** Packets waiting for the transport: they grow while the client does not read. */
  writeBuffer: unknown[]
  emit(event: string | symbol, ...args: unknown[]): boolean
  /** Sends a message; `sent` runs once it is written to the transport. */
  write(data: unknown, options?: object, sent?: () => void): unknown
  once(event: 'close', listener: () => void): unknown
  /** `discard`: close the transport now, without waiting for the write buffer to drain. */
  close(discard?: boolean): unknown
}

/** A Socket.IO packet decoder (the server parser's): messages in, whole packets out. */
export interface PacketDecoder {
  add(message: unknown): void
  on(event: 'decoded', listener: (packet: Packet) => void): unknown
  destroy(): void
}

/** The server's parser: a decoder per connection, and the encoder (a packet is one message or several). */
export interface PacketCodec {
  decoder(): PacketDecoder
  encode(packet: Packet): unknown[]
}

/** The parts of a Socket.IO server the binding reads beside its public API. */
export interface SocketIoInternals {
  _parser: { Decoder: new () => PacketDecoder }
  encoder: { encode(packet: Packet): unknown[] }
  _nsps: Map<string, unknown>
}

/** The codec of a server: its own parser (the default one, or a custom one such as msgpack). */
export function codecOf(io: SocketIoInternals): PacketCodec {
  return {
    decoder: () => new io._parser.Decoder(),
    encode: (packet) => io.encoder.encode(packet),
  }
}
