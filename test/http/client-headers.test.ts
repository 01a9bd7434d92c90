import got from 'got'
import ky from 'ky'
import { parseRateLimit } from 'ratelimit-header-parser'
import { describe, expect, it } from 'vitest'
import { ManualClock } from '../support/clock.js'
import { type AppSpec, appPerTest, BOTH_PATHS, type CommonOptions, storesOnClock } from './harness.js'

const stores = storesOnClock('client-headers')

interface Answer {
  status: number
  headers: Record<string, string>
}

/** The two real clients, neither retrying nor throwing on a 429: the test reads what they received. */
const clients: [string, (url: string) => Promise<Answer>][] = [
  [
    'got',
    async (url) => {
      const response = await got(url, { throwHttpErrors: false, retry: { limit: 0 } })
      return { status: response.statusCode, headers: response.headers as Record<string, string> }
    },
  ],
  [
    'ky',
    async (url) => {
      const response = await ky.get(url, { throwHttpErrors: false, retry: 0 })
      return { status: response.status, headers: Object.fromEntries(response.headers) }
    },
  ],
]

/** Header styles, and how the parser is told to read their reset: relative seconds, or epoch seconds. */
const styles: [string, Pick<CommonOptions, 'headers' | 'legacyHeaders'>, 'seconds' | 'unix'][] = [
  ['draft-6', { headers: 'draft-6' }, 'seconds'],
  ['draft-7', { headers: 'draft-7' }, 'seconds'],
  ['X-RateLimit-*', { headers: false, legacyHeaders: true }, 'unix'],
]

describe.each(BOTH_PATHS)('$name', (framework) => {
  const { start, close } = appPerTest((spec: AppSpec) => framework.start(spec))

  describe.each(stores)('%s', (_, makeStore) => {
    it.each(clients)(
      'a proactive %s client waits exactly as long as needed, in every header style',
      async (_, send) => {
        for (const [style, options, reset] of styles) {
          const clock = new ManualClock(1_700_000_000_000)
          const url = await start({
            global: { limit: 3, window: '10s', ...options, store: makeStore(clock) },
          })
          /** The parsed headers of one request, with the announced wait in whole seconds from the store's now. */
          const get = async () => {
            const answer = await send(`${url}/`)
            const parsed = parseRateLimit(answer.headers, { reset })
            expect(parsed, style).toBeDefined()
            const wait = Math.round(
              (parsed!.reset!.getTime() - (reset === 'unix' ? clock.now : Date.now())) / 1000,
            )
            return { status: answer.status, remaining: parsed!.remaining, wait, at: clock.now }
          }
          for (let i = 0; i < 2; i++) {
            expect((await get()).status, style).toBe(200)
            clock.advance(1_000)
          }
          // The default algorithm (sliding window counter): the third request leaves nothing.
          const third = await get()
          expect([third.status, third.remaining], style).toEqual([200, 0])
          clock.advance(1_000)
          const refused = await get()
          expect(refused.status, style).toBe(429)
          // The same instant on the allowed and the refused answer: 13.34 s after the first request.
          expect(third.at + third.wait * 1000, style).toBe(refused.at + refused.wait * 1000)
          expect(third.wait, style).toBe(12)
          // A second less is not enough; the announced wait is.
          clock.set(third.at + (third.wait - 1) * 1000)
          expect((await get()).status, style).toBe(429)
          clock.set(third.at + third.wait * 1000)
          expect((await get()).status, style).toBe(200)
          await close()
        }
      },
    )
  })
})
