/** Clients that tests control by hand (requests on connections of their own), and `until`: polling, bounded, for what happens out of sight. */
import { request as httpRequest } from 'node:http'
import { connect } from 'node:net'

/** A request on a connection of its own, which the test closes whenever it likes. */
export function open(url: string): { status: number | undefined; close(): void } {
  const client: { status: number | undefined; close(): void } = {
    status: undefined,
    close: () => pending.destroy(),
  }
  const pending = httpRequest(url, { agent: false })
  pending.on('response', (response) => {
    client.status = response.statusCode
    response.resume()
  })
  pending.on('error', () => {})
  pending.end()
  return client
}

/**
 * One HTTP/1.1 connection on which `count` GET requests of `path` are pipelined (written at once, without waiting
 * for an answer), as a client that floods one connection does. `received` is what came back so far; `close`
 * ends the connection and resolves once it is closed.
 */
export async function pipelined(
  url: string,
  count: number,
  path = '/',
): Promise<{ received(): string; close(): Promise<void> }> {
  const { hostname, port } = new URL(url)
  const socket = connect(Number(port), hostname)
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve)
    socket.once('error', reject)
  })
  socket.on('error', () => {})
  let received = ''
  socket.setEncoding('latin1')
  socket.on('data', (chunk: string) => {
    received += chunk
  })
  socket.write(`GET ${path} HTTP/1.1\r\nHost: ${hostname}:${port}\r\n\r\n`.repeat(count))
  return {
    received: () => received,
    close: () =>
      new Promise<void>((resolve) => {
        if (socket.destroyed) resolve()
        else {
          socket.once('close', () => resolve())
          socket.destroy()
        }
      }),
  }
}

/** How `until` polls: the longest it waits, and the pause between two looks. */
export interface Bound {
  /** Longest wait before the test fails, ms, on real time. @default 5_000 */
  within?: number
  /** Pause between two looks at the condition, ms. @default 5 */
  every?: number
}

/**
 * Polls `condition` on real timers until it holds, for at most `within` ms (5 s unless said): for what a server,
 * a store or another process does out of the test's sight. Fails naming `what` it waited for (a function is read
 * at the failure, to say where things stood), and for how long.
 */
export async function until(
  condition: () => boolean | Promise<boolean>,
  what: string | (() => string),
  { within = 5_000, every = 5 }: Bound = {},
): Promise<void> {
  const started = Date.now()
  for (;;) {
    if (await condition()) return
    if (Date.now() - started >= within) break
    await new Promise((resolve) => setTimeout(resolve, every))
  }
  const waited = Date.now() - started
  const described = typeof what === 'function' ? what() : what
  throw new Error(`timed out after ${waited} ms (bound ${within} ms) waiting until ${described}`)
}
