/**
 * One app per framework and major version with `slowDown()` in front of every route, so that one suite runs
 * unchanged against every adapter. GET / answers the request's slow-down info as JSON; GET /fail answers 500
 * with it. `handled` counts the handlers that ran.
 */
import type { SlowDownInfo, SlowDownOptions } from '@ratewindow/core'
import { slowDown as expressSlowDown } from '@ratewindow/express'
import express5 from 'express'
import express4 from 'express4'
import type { ManualTimers } from '../support/timers.js'
import { expressErrorsAsJson, listening, type TestApp } from './harness.js'

/** The options every adapter shares; callbacks get the adapter's own arguments. */
export type CommonSlowDownOptions = SlowDownOptions<never[]>

export interface SlowApp extends TestApp {
  /** Handlers that ran. */
  readonly handled: number
}

export interface SlowFramework {
  name: string
  start(options: CommonSlowDownOptions): Promise<SlowApp>
}

/** What a handler answers: the info the adapter put on the request. */
export type Answered = SlowDownInfo | null

function expressFramework(name: string, create: typeof express5): SlowFramework {
  return {
    name,
    async start(options) {
      let handled = 0
      const app = create()
      app.set('trust proxy', 'loopback')
      app.use(expressSlowDown(options as never))
      app.get('/', (request, response) => {
        handled++
        response.json(request.slowDown ?? null)
      })
      app.get('/fail', (request, response) => {
        handled++
        response.status(500).json(request.slowDown ?? null)
      })
      app.use(expressErrorsAsJson)
      const server = app.listen(0, '127.0.0.1')
      const running = await listening(server)
      return {
        ...running,
        get handled() {
          return handled
        },
      }
    },
  }
}

export const SLOW_FRAMEWORKS: SlowFramework[] = [
  expressFramework('Express 5', express5),
  expressFramework('Express 4', express4 as unknown as typeof express5),
]

/** One answered request. */
export interface Call {
  status: number
  info: Answered
  /** The delay the request was held for on the driven timers (0: none). */
  waited: number
}

/**
 * One request, released by advancing the timers by exactly the delay it was armed with (the app's middleware
 * runs on `timers`, and nothing else is delayed meanwhile).
 */
export async function call(
  app: SlowApp,
  timers: ManualTimers,
  path = '/',
  headers: Record<string, string> = {},
): Promise<Call> {
  const response = fetch(`${app.url}${path}`, { headers })
  const first = await Promise.race([response.then(() => 'answered' as const), timers.armed()])
  let waited = 0
  if (first !== 'answered') {
    waited = first
    timers.advance(first)
  }
  const answered = await response
  return { status: answered.status, info: (await answered.json()) as Answered, waited }
}
