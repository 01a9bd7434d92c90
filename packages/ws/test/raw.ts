/**
 * Clients as an attacker writes them: a WebSocket spoken over a bare TCP socket (frames written by hand, and a
 * reader that can stop reading), Socket.IO packets over it, and Engine.IO's HTTP long-polling by `fetch`.
 */
import { once } from 'node:events'
import { connect } from 'node:net'
import { until } from '../../../test/support/connections.js'

/** A frame from the server: its opcode (1 text, 2 binary, 8 close) and payload. */
export interface Frame {
  opcode: number
  payload: Buffer
}

export interface RawWebSocket {
  /** Frames read so far (none while paused). */
  frames: Frame[]
  /** Text frames read so far. */
  texts(): string[]
  /** Writes masked text frames, all in one write: `texts` in order. */
  send(...texts: string[]): void
  /** Writes `count` copies of one text frame, `chunk` frames per write, waiting for the socket to drain. */
  flood(text: string, count: number, chunk?: number): Promise<void>
  /** Stops reading: the server's frames stay in its buffers and the kernel's. */
  pause(): void
  resume(): void
  destroy(): void
}

/**
 * Opens a WebSocket to `path` on 127.0.0.1 with a hand-written upgrade request; resolves once it is open.
 * `paused`: it reads nothing after the upgrade's answer.
 */
export async function rawWebSocket(
  port: number,
  path = '/',
  headers: Record<string, string> = {},
  { paused = false } = {},
): Promise<RawWebSocket> {
  const socket = connect(port, '127.0.0.1')
  socket.on('error', () => {})
  await once(socket, 'connect')
  const lines = upgradeLines(port, path, 'dGhlIHNhbXBsZSBub25jZQ==', headers)
  socket.write(`${lines.join('\r\n')}\r\n\r\n`)
  const frames: Frame[] = []
  let buffered: Buffer = Buffer.alloc(0)
  let open = false
  socket.on('data', (chunk: Buffer) => {
    buffered = Buffer.concat([buffered, chunk])
    if (!open) {
      const end = buffered.indexOf('\r\n\r\n')
      if (end === -1) return
      const status = buffered.subarray(0, buffered.indexOf('\r\n')).toString()
      if (!status.includes(' 101 ')) {
        socket.destroy(new Error(`the upgrade was refused: ${status}`))
        return
      }
      open = true
      buffered = buffered.subarray(end + 4)
      // A client that never reads stops at once: what the server sends stays in the kernel's buffers and its own.
      if (paused) socket.pause()
    }
    buffered = readFrames(buffered, frames)
  })
  await until(() => open || socket.destroyed, 'the upgrade answered')
  if (!open) throw new Error('the upgrade was refused')
  const write = (texts: string[]) => socket.write(Buffer.concat(texts.map((text) => frame(text))))
  return {
    frames,
    texts: () => frames.filter((each) => each.opcode === 1).map((each) => each.payload.toString()),
    send: (...texts) => void write(texts),
    async flood(text, count, chunk = 10_000) {
      const one = frame(text)
      const block = Buffer.concat(Array.from({ length: Math.min(chunk, count) }, () => one))
      for (let sent = 0; sent < count; sent += chunk) {
        const frames = Math.min(chunk, count - sent)
        if (!socket.write(block.subarray(0, frames * one.length))) await once(socket, 'drain')
      }
    },
    pause: () => socket.pause(),
    resume: () => socket.resume(),
    destroy: () => socket.destroy(),
  }
}

/** A masked text frame (a zero mask: the payload is written as it is, which RFC 6455 allows). */
function frame(text: string): Buffer {
  const payload = Buffer.from(text)
  const length = payload.length
  const header =
    length < 126
      ? Buffer.from([0x81, 0x80 | length])
      : Buffer.from([0x81, 0x80 | 126, length >> 8, length & 0xff])
  return Buffer.concat([header, Buffer.alloc(4), payload])
}

/** Reads the whole frames at the head of `data` into `frames`; returns what is left. */
function readFrames(data: Buffer, frames: Frame[]): Buffer {
  let rest = data
  while (rest.length >= 2) {
    let length = rest[1]! & 0x7f
    let offset = 2
    if (length === 126) {
      if (rest.length < 4) break
      length = rest.readUInt16BE(2)
      offset = 4
    } else if (length === 127) {
      if (rest.length < 10) break
      length = Number(rest.readBigUInt64BE(2))
      offset = 10
    }
    if (rest.length < offset + length) break
    frames.push({ opcode: rest[0]! & 0x0f, payload: rest.subarray(offset, offset + length) })
    rest = rest.subarray(offset + length)
  }
  return rest
}

/** A Socket.IO connection over a raw WebSocket (Engine.IO 4): open, its namespaces joined with CONNECT packets. */
export interface RawSocketIo extends RawWebSocket {
  /** Socket.IO packets read (Engine.IO message packets, the leading `4` taken off). */
  packets(): string[]
}

/** Opens an Engine.IO connection on the WebSocket transport and waits for its open packet. */
export async function rawSocketIo(port: number, headers: Record<string, string> = {}): Promise<RawSocketIo> {
  const ws = await rawWebSocket(port, '/socket.io/?EIO=4&transport=websocket', headers)
  await until(() => ws.texts().some((text) => text.startsWith('0{')), 'the Engine.IO open packet')
  return {
    ...ws,
    packets: () => ws.texts().flatMap((text) => (text.startsWith('4') ? [text.slice(1)] : [])),
  }
}

/** Engine.IO's long-polling transport, spoken with `fetch`: a handshake, then packets in and out by `sid`. */
export class Polling {
  readonly #base: string
  readonly #headers: Record<string, string>
  sid = ''

  constructor(port: number, headers: Record<string, string> = {}) {
    this.#base = `http://127.0.0.1:${port}/socket.io/?EIO=4&transport=polling`
    this.#headers = headers
  }

  /** The handshake, with `query` appended as the attacker wrote it (e.g. `&sid=`): the status, and the sid. */
  async handshake(query = ''): Promise<number> {
    const response = await fetch(`${this.#base}${query}`, { headers: this.#headers })
    const body = await response.text()
    if (response.status === 200 && body.startsWith('0{')) this.sid = JSON.parse(body.slice(1)).sid
    return response.status
  }

  /** Sends Socket.IO packets (each an Engine.IO message: `4` is added), in one POST. */
  async post(...packets: string[]): Promise<number> {
    const response = await fetch(`${this.#base}&sid=${this.sid}`, {
      method: 'POST',
      headers: { ...this.#headers, 'content-type': 'text/plain;charset=UTF-8' },
      body: packets.map((packet) => `4${packet}`).join('\x1e'),
    })
    await response.text()
    return response.status
  }

  /** One poll: the Socket.IO packets waiting for the client (Engine.IO's own, such as pings, left out). */
  async poll(): Promise<string[]> {
    const response = await fetch(`${this.#base}&sid=${this.sid}`, { headers: this.#headers })
    const body = await response.text()
    if (response.status !== 200) return []
    return body.split('\x1e').flatMap((packet) => (packet.startsWith('4') ? [packet.slice(1)] : []))
  }

  /** Joins a namespace: its CONNECT, then the answer (`40…` joined, `44…` refused). */
  async join(namespace = '/', auth?: object): Promise<string> {
    const prefix = namespace === '/' ? '' : `${namespace},`
    await this.post(`0${prefix}${auth === undefined ? '' : JSON.stringify(auth)}`)
    const [answer] = await this.poll()
    return answer ?? ''
  }
}

/**
 * An upgrade request written by hand to `path`, with `key` as its `Sec-WebSocket-Key` (valid or not): resolves
 * with the first line of the answer (`'(no answer)'` when the server closed without one), once the client has
 * closed its socket. It reads no further than that line.
 */
export async function rawUpgrade(
  port: number,
  path: string,
  key: string,
  headers: Record<string, string> = {},
): Promise<string> {
  const socket = connect(port, '127.0.0.1')
  socket.on('error', () => {})
  await once(socket, 'connect')
  const lines = upgradeLines(port, path, key, headers)
  socket.write(`${lines.join('\r\n')}\r\n\r\n`)
  let answer = ''
  socket.on('data', (chunk: Buffer) => {
    answer += chunk.toString('latin1')
    if (answer.includes('\r\n')) socket.destroy()
  })
  await until(() => socket.destroyed, 'the upgrade answered')
  return answer.split('\r\n')[0] || '(no answer)'
}

/** The lines of a WebSocket upgrade request to `path`, with `key` as its `Sec-WebSocket-Key` and `headers` added. */
function upgradeLines(port: number, path: string, key: string, headers: Record<string, string>): string[] {
  return [
    `GET ${path} HTTP/1.1`,
    `Host: 127.0.0.1:${port}`,
    'Upgrade: websocket',
    'Connection: Upgrade',
    `Sec-WebSocket-Key: ${key}`,
    'Sec-WebSocket-Version: 13',
    ...Object.entries(headers).map(([name, value]) => `${name}: ${value}`),
  ]
}
