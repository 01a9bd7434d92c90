/**
 * An application process that admits requests through a SyncedStore and then ends by itself (nothing left to do),
 * without `close()`: for the `beforeExit` test of test/synced-store.test.ts. Its node-redis connection is
 * unref'd once it is done, so that it does not keep the process alive. Prints the Redis key of its counts; argv: port, prefix,
 * requests.
 */
import { RateLimiter, SyncedStore, slidingWindowCounter } from '@ratewindow/core'
import { createClient } from 'redis'

const [port, prefix, requests] = process.argv.slice(2)
const client = createClient({ socket: { host: '127.0.0.1', port: Number(port) } })
client.on('error', (error) => console.error(error))
await client.connect()
const rule = slidingWindowCounter({ limit: 100, window: '1h' })
// No tick before the exit, and nothing sent for reaching maxPending.
const store = new SyncedStore({ client, interval: '1h', maxPending: 100 })
const limiter = new RateLimiter({ rules: rule, store, prefix })
for (let i = 0; i < Number(requests); i++) {
  const result = await limiter.limit('k')
  if (!result.allowed || result.source !== 'store')
    throw new Error(`not admitted by the store: ${result.source}`)
}
console.log(store.keyFor(limiter.namespace, 'k', rule))
// Done: the connection no longer keeps the process alive, which ends once nothing else is left to do.
client.unref()
