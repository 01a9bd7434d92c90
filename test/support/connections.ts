/** Clients that tests control by hand (requests on connections of their own), and `until`: polling, bounded, for what happens out of sight. */
import { request as httpRequest } from 'node:http'

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
