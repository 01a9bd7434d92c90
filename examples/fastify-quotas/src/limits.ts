/**
 * The API's limits, which the app gives the plugin and `ratewindow --config src/limits.ts` reads: two plans of one
 * shape, each a rate and a monthly quota billed on the 17th at 09:00 in Paris, warned at 80 %. QUOTA sets the free
 * plan's month (20 units by default, to see a 402 in a few requests); pro has 10 times the rate and the quota.
 */
import { gcra, quota } from '@ratewindow/fastify'

export const PREFIX = 'api'

const FREE_QUOTA = Number(process.env.QUOTA ?? 20)

/** One plan's rules: the rate per minute and the month's units. */
const planOf = (perMinute: number, perMonth: number) => [
  gcra({ limit: perMinute, window: '1m', name: 'per-minute' }),
  quota({
    limit: perMonth,
    period: 'month',
    anchor: '2026-01-17T09:00',
    timeZone: 'Europe/Paris',
    name: 'monthly',
    warnAt: 0.8,
  }),
]

export const PLANS = {
  free: planOf(600, FREE_QUOTA),
  pro: planOf(6000, 10 * FREE_QUOTA),
}

/**
 * For the CLI: the limiter as the app makes it (its plans; operators raise a customer's quota over its plan). The
 * app's `key` and `plan` functions are the server's; the CLI reads each key's plan from what Redis recorded.
 */
export const limiters = [{ name: 'api', plans: PLANS, prefix: PREFIX }]
