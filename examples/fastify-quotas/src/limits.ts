/**
 * The API's limits, which the app gives the plugin and `ratewindow --config src/limits.ts` reads: 600 requests a
 * minute and a monthly quota billed on the 17th at 09:00 in Paris, warned at 80 %. QUOTA sets the month's units
 * (20 by default, to see a 402 in a few requests).
 */
import { gcra, quota } from '@ratewindow/fastify'

export const PREFIX = 'api'

export const RULES = [
  gcra({ limit: 600, window: '1m' }),
  quota({
    limit: Number(process.env.QUOTA ?? 20),
    period: 'month',
    anchor: '2026-01-17T09:00',
    timeZone: 'Europe/Paris',
    name: 'monthly',
    warnAt: 0.8,
  }),
]

/** For the CLI: the limiter as the app makes it (overrides on: operators raise a customer's quota). */
export const limiters = [{ name: 'api', rules: RULES, prefix: PREFIX, overrides: true }]
