/** Clients that HTTP tests control by hand: requests on connections of their own, and polling for the server. */
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

/**
 * Polls `condition` (every 5 ms, 5 s at most, on real timers): for what the server does out of the client's sight.
 */
export async function until(condition: () => boolean | Promise<boolean>, what: string): Promise<void> {
  for (let i = 0; i < 1_000; i++) {
    if (await condition()) return
    await new Promise((resolve) => setTimeout(resolve, 5))
  }
  throw new Error(`timed out waiting until ${what}`)
}
