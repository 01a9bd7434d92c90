/**
 * Raw HTTP/1.1 clients for the hostile-client tests of the Node adapters (Express, Koa): each request written as an
 * attacker writes it, on a socket of its own, with whatever headers it likes.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import { type AddressInfo, connect, type Socket } from 'node:net'

/** What came back for one raw request: its status, headers (names in lower case) and body. */
export interface RawAnswer {
  status: number
  headers: Record<string, string>
  body: string
}

/** The request text of a GET of `path` with `headers`, the connection closed after the answer. */
function requestText(path: string, headers: Record<string, string>): string {
  const lines = Object.entries(headers).map(([name, value]) => `${name}: ${value}\r\n`)
  return `GET ${path} HTTP/1.1\r\nHost: api.example\r\n${lines.join('')}Connection: close\r\n\r\n`
}

/** Reads a status line and headers from the text of an answer. */
function parseAnswer(text: string): RawAnswer {
  const end = text.indexOf('\r\n\r\n')
  const [statusLine = '', ...lines] = text.slice(0, end < 0 ? text.length : end).split('\r\n')
  const headers: Record<string, string> = {}
  for (const line of lines) {
    const colon = line.indexOf(':')
    headers[line.slice(0, colon).toLowerCase()] = line.slice(colon + 1).trim()
  }
  return { status: Number(statusLine.split(' ')[1]), headers, body: end < 0 ? '' : text.slice(end + 4) }
}

/** One raw GET of `path` with `headers` on a connection of its own: the answer once the server closed it. */
export function rawGet(port: number, path: string, headers: Record<string, string> = {}): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1')
    let text = ''
    socket.setEncoding('latin1')
    socket.on('data', (chunk: string) => {
      text += chunk
    })
    socket.on('error', reject)
    socket.on('end', () => resolve(parseAnswer(text)))
    socket.write(requestText(path, headers))
  })
}

/** The statuses of `count` raw GETs of `path`, one after another, the headers of each from `headers(i)`. */
export async function rawStatuses(
  port: number,
  path: string,
  count: number,
  headers: (request: number) => Record<string, string>,
): Promise<number[]> {
  const statuses: number[] = []
  for (let i = 0; i < count; i++) statuses.push((await rawGet(port, path, headers(i))).status)
  return statuses
}

/** A raw GET left open: the status once its head came (undefined before), and `leave()` to disconnect. */
export interface OpenRequest {
  readonly status: number | undefined
  leave(): Promise<void>
}

/** Sends a raw GET of `path` and keeps the connection until `leave()`, which closes it and resolves once closed. */
export function openGet(port: number, path: string): OpenRequest {
  const socket = connect(port, '127.0.0.1')
  let text = ''
  socket.setEncoding('latin1')
  socket.on('data', (chunk: string) => {
    text += chunk
  })
  socket.on('error', () => {})
  socket.write(requestText(path, {}))
  return {
    get status() {
      return text.includes('\r\n') ? parseAnswer(text).status : undefined
    },
    leave: () => closed(socket),
  }
}

/** Destroys `socket`; resolves once it is closed. */
export function closed(socket: Socket): Promise<void> {
  return new Promise((resolve) => {
    if (socket.destroyed) resolve()
    else {
      socket.once('close', () => resolve())
      socket.destroy()
    }
  })
}

/** The statuses of the answers in `text` (pipelined answers, one after another), by status. */
export function countStatuses(text: string): Record<number, number> {
  const counts: Record<number, number> = {}
  for (const [, status] of text.matchAll(/HTTP\/1\.1 (\d{3}) /g))
    counts[Number(status)] = (counts[Number(status)] ?? 0) + 1
  return counts
}

/** A listening server on 127.0.0.1 and the sockets it accepted (to read what it buffers for each). */
export interface RawServer {
  port: number
  sockets: Set<Socket>
  close(): Promise<void>
}

/**
 * One server that hands each request to the first of `apps` whose path prefix it starts with (the last app takes
 * the rest): apps of different trust settings behind one port.
 */
export async function serveApps(
  apps: [prefix: string, handle: (request: IncomingMessage, response: ServerResponse) => void][],
): Promise<RawServer> {
  const server: Server = createServer((request, response) => {
    const app = apps.find(([prefix]) => request.url?.startsWith(prefix)) ?? apps[apps.length - 1]!
    app[1](request, response)
  })
  const sockets = new Set<Socket>()
  server.on('connection', (socket) => {
    sockets.add(socket)
    socket.once('close', () => sockets.delete(socket))
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return {
    port: (server.address() as AddressInfo).port,
    sockets,
    close: () => {
      server.closeAllConnections()
      return new Promise((resolve) => server.close(() => resolve()))
    },
  }
}
