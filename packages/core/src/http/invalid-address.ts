/**
 * A client address that is not an IP address, for adapters that read it themselves (Hono's and Next.js's
 * `trustProxy`, a `clientIp` function): a forwarded entry such as `unknown` or garbage (the request came round the
 * proxy, or the proxy writes something else). The default key refuses it (`ERR_RATEWINDOW_INVALID_IP`): no bucket
 * is shared and nothing is counted, as everywhere. Thrown into the framework, it would print a stack trace per
 * request, at the rate a client sends them: these adapters answer it themselves instead, and warn once.
 */
import type { Awaitable } from '../stores/types.js'
import { isThenable } from '../support/awaitable.js'
import { RateLimitError } from '../support/errors.js'
import { emitWarning } from '../support/runtime.js'

/** What `unlessInvalidAddress` answers for a request whose client address is not an IP address. */
export const INVALID_ADDRESS: unique symbol = Symbol('invalid address')

let warned = false

/**
 * A decision as the engine gave it (`decideNow`, `decide`: a key that fails rejects, never throws), or
 * `INVALID_ADDRESS` where it failed because the client address is not an IP address; any other failure rejects as
 * it did. A decision made at once is returned as it is. The first such request warns once per process
 * (`RATEWINDOW_INVALID_ADDRESS`), saying how the adapter answers it (`answered`: 'answered 500').
 */
export function unlessInvalidAddress<T>(
  decided: Awaitable<T>,
  answered: string,
): Awaitable<T | typeof INVALID_ADDRESS> {
  if (!isThenable(decided)) return decided
  return Promise.resolve(decided).then(undefined, (error: unknown) => invalidAddress(error, answered))
}

function invalidAddress(error: unknown, answered: string): typeof INVALID_ADDRESS {
  if (!(error instanceof RateLimitError) || error.code !== 'ERR_RATEWINDOW_INVALID_IP') throw error
  if (!warned) {
    warned = true
    emitWarning(
      `${error.message} A request's client address, as \`trustProxy\` (or \`clientIp\`) read it, is not an IP ` +
        `address: such requests are ${answered} and counted nowhere. Check that every request comes through the ` +
        'proxies `trustProxy` names, and what they write in X-Forwarded-For. Once.',
      'RATEWINDOW_INVALID_ADDRESS',
    )
  }
  return INVALID_ADDRESS
}
