/**
 * Issue 24, the reference check: express-slow-down 2 and `@ratewindow/express`'s `slowDown()` given the same
 * options compute the same delay for each request. express-slow-down runs in this process on fake timers (its
 * delay is read from `req.slowDown.delay`, its timers never run on real time); ours runs over HTTP on driven
 * timers (each request is held for exactly the delay it reports). Every request of a run arrives at one instant
 * of the counting clock, as a burst does; then the clock moves one window on, where both start again.
 */
import { EventEmitter } from 'node:events'
import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { MemoryStore, type SlowDownOptions } from '@ratewindow/core'
import type { Request, Response } from 'express'
import { slowDown as referenceSlowDown } from 'express-slow-down'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { ManualClock } from '../support/clock.js'
import { ManualTimers } from '../support/timers.js'
import { call, SLOW_FRAMEWORKS, type SlowApp } from './slow-down-harness.js'

/** A whole number of 15-minute windows: express-slow-down's window (from the first request) and ours align. */
const START = 1_800_000_000_000

type Options = SlowDownOptions<[Request, Response]>

/** express-slow-down's delays: `first` requests at START, then `after` more one window later. */
async function referenceDelays(options: Options, first: number, after: number): Promise<number[]> {
  vi.useFakeTimers({
    toFake: ['Date', 'setTimeout', 'clearTimeout', 'setInterval', 'clearInterval'],
    now: START,
  })
  try {
    const middleware = referenceSlowDown({
      ...(options as object),
      keyGenerator: () => 'client',
      validate: false,
    })
    const delays: number[] = []
    const one = async () => {
      const request = { ip: '127.0.0.1', headers: {}, method: 'GET', app: { get: () => false } } as never
      const response = Object.assign(new EventEmitter(), { statusCode: 200, headersSent: false })
      await middleware(request, response as never, () => {})
      delays.push((request as { slowDown: { delay: number } }).slowDown.delay)
      response.emit('close') // its delay timer is cleared: only the computed delay is compared
    }
    for (let i = 0; i < first; i++) await one()
    vi.advanceTimersByTime(options.windowMs ?? 60_000)
    for (let i = 0; i < after; i++) await one()
    return delays
  } finally {
    vi.useRealTimers()
  }
}

const apps: SlowApp[] = []
afterEach(async () => {
  await Promise.all(apps.splice(0).map((app) => app.close()))
})

/** Ours over HTTP (Express 5): the delay each request was held for, and the one it reports. */
async function ourDelays(options: Options, first: number, after: number) {
  const clock = new ManualClock(START)
  const timers = new ManualTimers(new ManualClock())
  const app = await SLOW_FRAMEWORKS[0]!.start({
    ...(options as object),
    keyGenerator: () => 'client',
    store: new MemoryStore({ clock: clock.read }),
    timers,
  })
  apps.push(app)
  const waited: number[] = []
  const reported: number[] = []
  for (let i = 0; i < first + after; i++) {
    if (i === first) clock.advance(options.windowMs ?? 60_000)
    const answered = await call(app, timers)
    waited.push(answered.waited)
    reported.push(answered.info!.delay)
  }
  return { waited, reported }
}

const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i)

describe('slowDown() against express-slow-down 2 (issue 24)', () => {
  it('is express-slow-down installed, at major version 2', async () => {
    const manifest = join(
      dirname(createRequire(import.meta.url).resolve('express-slow-down')),
      '..',
      'package.json',
    )
    expect(JSON.parse(readFileSync(manifest, 'utf8')).version).toMatch(/^2\./)
  })

  it.each<[string, Options, number[]]>([
    [
      "the issue's reference: windowMs 15 min, delayAfter 5, delayMs (used - 5) × 100, maxDelayMs 2 s",
      {
        windowMs: 15 * 60 * 1000,
        delayAfter: 5,
        delayMs: (used) => (used - 5) * 100,
        maxDelayMs: 2_000,
      },
      [0, 0, 0, 0, 0, ...range(1, 20).map((n) => n * 100), 2_000, 2_000, 2_000, 2_000, 2_000],
    ],
    [
      'delayMs as a number: the same delay for every request after delayAfter',
      { windowMs: 15 * 60 * 1000, delayAfter: 3, delayMs: 500 },
      [0, 0, 0, ...range(4, 30).map(() => 500)],
    ],
    [
      "express-slow-down's defaults: windowMs 1 min, delayAfter 1, one more second per request",
      {},
      range(1, 30).map((used) => (used - 1) * 1_000),
    ],
    [
      'delayAfter, delayMs and maxDelayMs as async functions of the request',
      {
        windowMs: 15 * 60 * 1000,
        delayAfter: async (request) => (request.method === 'GET' ? 2 : 100),
        delayMs: async (used, request) => used * (request.method === 'GET' ? 50 : 1),
        maxDelayMs: async () => 700,
      },
      [0, 0, ...range(3, 30).map((used) => Math.min(700, used * 50))],
    ],
  ])(
    '%s: the same delay for each of 30 requests, and again from the next window',
    async (_, options, expected) => {
      const reference = await referenceDelays(options, 30, 4)
      const ours = await ourDelays(options, 30, 4)
      // The next window starts again at full speed.
      const restarted = expected.slice(0, 4)
      expect(reference).toEqual([...expected, ...restarted])
      expect(ours.reported).toEqual(reference)
      expect(ours.waited).toEqual(reference)
    },
  )
})
