import { RateLimitError } from '../../support/errors.js'
import type { StoreRequest } from '../types.js'

export /** The script's `repaired` bit mask (see script.ts) as one notice per repaired rule. */
function repairedRules(request: StoreRequest, mask: number | undefined): RateLimitError[] {
  const errors: RateLimitError[] = []
  if (!mask) return errors
  request.rules.forEach((rule, i) => {
    if (Math.floor(mask / 2 ** i) % 2 === 1) {
      errors.push(
        new RateLimitError(
          'ERR_RATEWINDOW_STORE',
          `Repaired the Redis key of rule ${rule.name} (${rule.algorithm}) for this client: it held another type, unreadable content or no TTL, and was rewritten from a fresh state (or given its TTL). Check what else writes under the store's prefix.`,
        ),
      )
    }
  })
  if (request.penalty !== undefined && Math.floor(mask / 2 ** request.rules.length) % 2 === 1) {
    errors.push(
      new RateLimitError(
        'ERR_RATEWINDOW_STORE',
        "Repaired the Redis penalty key for this client: it held another type or unreadable content, and was rewritten from a fresh state. Check what else writes under the store's prefix.",
      ),
    )
  }
  return errors
}
