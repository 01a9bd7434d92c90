/**
 * Shadow mode in combination, over HTTP in every framework version, on memory and Redis: a penalty on a limiter
 * that is wholly in shadow mode, and the concurrency limit (which shadow mode does not cover) beside it.
 */
import type { DecisionEvent } from '@ratewindow/core'
import request from 'supertest'
import { describe, expect, it } from 'vitest'
import { ManualClock } from '../support/clock.js'
import { type AppSpec, appPerTest, BOTH_PATHS, releaseHeld, storesOnClock, waitForHeld } from './harness.js'

const stores = storesOnClock('shc')

/** Every rate limit header a shadow limiter must not send, in any format. */
const RATE_LIMIT_HEADERS = [
  'ratelimit',
  'ratelimit-policy',
  'ratelimit-limit',
  'ratelimit-remaining',
  'ratelimit-reset',
  'retry-after',
  'x-ratelimit-limit',
  'x-ratelimit-remaining',
  'x-ratelimit-reset',
]

const rateLimitHeadersOf = (headers: Record<string, unknown>) =>
  RATE_LIMIT_HEADERS.filter((name) => headers[name] !== undefined)

describe.each(BOTH_PATHS)('$name', (framework) => {
  const { start } = appPerTest((spec: AppSpec) => framework.start(spec), releaseHeld)

  describe.each(stores)('with the %s', (_, makeStore) => {
    it('penalty on a shadow limiter: the block is reported as shadow-limited and every request passes, without headers', async () => {
      const clock = new ManualClock(1_700_000_000_000)
      const events: DecisionEvent[] = []
      const url = await start({
        global: {
          limit: 1,
          window: '1s',
          algorithm: 'fixed-window',
          shadow: true,
          legacyHeaders: true,
          penalty: { after: 2, within: '10s', block: '30s', factor: 2, maxBlock: '1m', statusCode: 403 },
          store: makeStore(clock),
          observer: { onDecision: (event) => void events.push(event) },
        },
      })
      const get = async () => {
        const response = await request(url).get('/').expect(200, 'ok')
        expect(rateLimitHeadersOf(response.headers)).toEqual([])
      }
      await get()
      await get() // the rule would refuse: the first denial
      await get() // the second denial starts the block, which enforcing would answer 403
      clock.advance(10_500) // the window has long rolled over; the block has 19.5 s left
      await get() // the rule would admit it, the block would not
      clock.advance(19_500) // the block is over
      await get()
      await get()
      expect(events.map((event) => event.outcome)).toEqual([
        'allowed',
        'shadow-limited',
        'shadow-limited',
        'shadow-limited',
        'allowed',
        'shadow-limited',
      ])
      const results = events.map((event) => event.result)
      for (const result of results) expect(result).toMatchObject({ allowed: true, retryAfter: 0 })
      expect(results.map((result) => result.shadow)).toEqual([undefined, true, true, true, undefined, true])
      // What enforcing would have done: a block of 30 s from the second denial, 19.5 s left after 10.5 s.
      expect(results.map((result) => result.blocked)).toEqual([
        undefined,
        undefined,
        30_000,
        19_500,
        undefined,
        undefined,
      ])
      // The rule admitted the fourth request: only the block would have refused it.
      expect(results[3]!.rules[0]!.allowed).toBe(true)
      expect(new Set(events.map((event) => event.rule))).toEqual(new Set([results[0]!.rule.name]))
    })

    it('concurrency beside a shadow limiter: no free slot still refuses, with draft-11 concurrency headers only', async () => {
      const clock = new ManualClock(1_700_000_000_000)
      const outcomes: string[] = []
      const url = await start({
        global: {
          limit: 2,
          window: '1m',
          algorithm: 'fixed-window',
          shadow: true,
          headers: 'draft-11',
          concurrency: { limit: 1, lease: '1m' },
          store: makeStore(clock),
          observer: { onDecision: (event) => void outcomes.push(event.outcome) },
        },
      })
      const policy = '"concurrency";q=1;qu="concurrent-requests"'
      const parked = request(url)
        .get('/hold')
        .then((response) => response)
      await waitForHeld(1)
      const denied = await request(url).get('/').expect(429)
      expect(denied.headers['retry-after']).toBe('1')
      // The concurrency limit is enforced and described; the shadow rule is in no header.
      expect(denied.headers['ratelimit']).toBe('"concurrency";r=0')
      expect(denied.headers['ratelimit-policy']).toBe(policy)
      expect(denied.body).toMatchObject({ error: 'Too Many Requests' })
      releaseHeld()
      const held = await parked
      expect(held.status).toBe(200)
      expect(held.headers['ratelimit']).toBe('"concurrency";r=0')
      expect(held.headers['ratelimit-policy']).toBe(policy)
      // The refused request's charge was given back: one counted so far, so one more is admitted.
      const served = await request(url).get('/').expect(200)
      expect(served.headers['ratelimit']).toBe('"concurrency";r=0')
      expect(served.headers['retry-after']).toBeUndefined()
      // Over the (shadow) rate limit: passes.
      await request(url).get('/').expect(200)
      expect(outcomes).toEqual(['allowed', 'allowed', 'allowed', 'shadow-limited'])
    })

    it('concurrency beside a shadow limiter: refusing a shadow-limited request gives back nothing it was not charged', async () => {
      const clock = new ManualClock(1_700_000_000_000)
      const outcomes: string[] = []
      const url = await start({
        global: {
          limit: 1,
          window: '1m',
          algorithm: 'fixed-window',
          shadow: true,
          concurrency: { limit: 1, lease: '1m' },
          store: makeStore(clock),
          observer: { onDecision: (event) => void outcomes.push(event.outcome) },
        },
      })
      await request(url).get('/').expect(200) // the whole quota
      const parked = request(url)
        .get('/hold')
        .then((response) => response)
      await waitForHeld(1)
      // Shadow-limited (nothing charged), then refused for want of a slot: draft-6 has no concurrency header.
      const denied = await request(url).get('/').expect(429)
      expect(denied.headers['retry-after']).toBe('1')
      expect(rateLimitHeadersOf(denied.headers)).toEqual(['retry-after'])
      releaseHeld()
      expect((await parked).status).toBe(200)
      // Still over the quota: a refund of the refused request would have made this one 'allowed'.
      await request(url).get('/').expect(200)
      expect(outcomes).toEqual(['allowed', 'shadow-limited', 'shadow-limited', 'shadow-limited'])
    })
  })
})
