/**
 * Issue 24: `slowDown()` counts through RedisStore with every supported client, standalone and on the Cluster:
 * two processes (two Express apps, each with a client of its own) share one count, so the third request of a
 * client is delayed whichever process it reaches.
 */
import { RedisStore } from '@ratewindow/core'
import { afterEach, describe, expect, it } from 'vitest'
import { ManualClock } from '../support/clock.js'
import { redisEnvironment } from '../support/redis.js'
import { CLIENT_FAMILIES, connect } from '../support/redis-clients.js'
import { ManualTimers } from '../support/timers.js'
import { call, SLOW_FRAMEWORKS, type SlowApp } from './slow-down-harness.js'

const apps: SlowApp[] = []
afterEach(async () => {
  await Promise.all(apps.splice(0).map((app) => app.close()))
})

let prefixes = 0

describe.each(CLIENT_FAMILIES)('$name', (family) => {
  it.each(['standalone', 'Cluster'] as const)('%s: two processes share the count', async (target) => {
    const { standalonePort, clusterNodes } = redisEnvironment()
    const clock = new ManualClock(1_800_000_000_000)
    const timers = new ManualTimers(new ManualClock())
    const prefix = `slowc${process.pid}x${prefixes++}:`
    const start = async () => {
      const client = await connect(family, target === 'standalone' ? standalonePort : clusterNodes)
      const app = await SLOW_FRAMEWORKS[0]!.start({
        store: new RedisStore({ client, clock: clock.read, prefix }),
        timers,
        delayAfter: 2,
        delayMs: (used: number) => (used - 2) * 400,
      })
      apps.push(app)
      return app
    }
    const [one, two] = [await start(), await start()]
    const calls = [
      await call(one, timers),
      await call(two, timers),
      await call(one, timers),
      await call(two, timers),
    ]
    expect(calls.map((each) => each.info?.used)).toEqual([1, 2, 3, 4])
    expect(calls.map((each) => each.waited)).toEqual([0, 0, 400, 800])
  })
})
