import { fixedWindow, rateLimit, slidingWindowCounter } from '@ratewindow/express'
import { rateLimitMetrics } from '@ratewindow/otel'
import express from 'express'

/**
 * GET /search: 8 requests per minute per client, enforced, and a 3-per-10-seconds burst rule in shadow mode
 * (counted and reported as 'shadow-limited', never refused). Metrics go to the global meter provider.
 */
export function createApp(): express.Express {
  const app = express()
  app.get(
    '/search',
    rateLimit({
      name: 'search',
      rules: [
        fixedWindow({ limit: 8, window: '1m', name: 'per-minute' }),
        slidingWindowCounter({ limit: 3, window: '10s', name: 'burst', shadow: true }),
      ],
      observer: rateLimitMetrics(),
    }),
    (_request, response) => {
      response.send('results')
    },
  )
  return app
}
