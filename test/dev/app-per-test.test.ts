/**
 * The most common test and dev layout (issue 21, item 1): a store at module level, an app built per test (or per
 * reload of the app module) on it. The newest app takes the counters over; an old app that still decides warns
 * once (`RATEWINDOW_SUPERSEDED_LIMITER`), and nothing ever throws for it. Every adapter and framework version.
 */
import { MemoryStore } from '@ratewindow/core'
import { rateLimit as expressRateLimit } from '@ratewindow/express'
import { rateLimit as koaRateLimit } from '@ratewindow/koa'
import express from 'express'
import Koa from 'koa'
import request from 'supertest'
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest'
import { FRAMEWORKS, type RunningApp } from '../http/harness.js'

const warnings: Error[] = []
const onWarning = (warning: Error) => {
  if ((warning as Error & { code?: string }).code === 'RATEWINDOW_SUPERSEDED_LIMITER') warnings.push(warning)
}
process.on('warning', onWarning)
afterAll(() => {
  process.off('warning', onWarning)
})

async function statuses(url: string, count: number): Promise<number[]> {
  const answers: number[] = []
  for (let i = 0; i < count; i++) answers.push((await fetch(`${url}/`)).status)
  return answers
}

/** Process warnings are emitted on the next tick. */
const warningsSettled = () => new Promise((resolve) => setImmediate(resolve))

describe.each(FRAMEWORKS)('$name: one app per test on a module-level store', (framework) => {
  // The store lives in a module that is not rebuilt (a test file's top level, a dev server's unreloaded module).
  const store = new MemoryStore()
  const running: RunningApp[] = []
  const createApp = async () => {
    const app = await framework.start({ global: { limit: 2, store } })
    running.push(app)
    return app
  }

  beforeEach(() => {
    warnings.length = 0
    store.clear() // each test its own counters
  })
  afterEach(async () => {
    await Promise.all(running.splice(0).map((app) => app.close()))
  })
  afterAll(() => store.close())

  it('the first test builds its app', async () => {
    const app = await createApp()
    expect(await statuses(app.url, 3)).toEqual([200, 200, 429])
  })

  it('the second test builds it again on the same store: no ERR_RATEWINDOW_SHARED_COUNTER, fresh counters, no warning', async () => {
    const app = await createApp()
    expect(await statuses(app.url, 3)).toEqual([200, 200, 429])
    await warningsSettled()
    expect(warnings).toEqual([])
  })

  it('a reloaded app module, 50 times over: each reload works', async () => {
    for (let reload = 0; reload < 50; reload++) {
      store.clear()
      const app = await createApp()
      expect(await statuses(app.url, 1)).toEqual([200])
    }
  })

  it('two apps live at once (describe.concurrent): the older one warns once when it decides, and both keep answering', async () => {
    const older = await createApp()
    const newer = await createApp()
    expect(await statuses(newer.url, 1)).toEqual([200])
    await warningsSettled()
    expect(warnings).toEqual([])
    // Both count the same counters, as they share store and namespace: the older one says so, once.
    expect(await statuses(older.url, 2)).toEqual([200, 429])
    await warningsSettled()
    expect(warnings).toHaveLength(1)
    expect(warnings[0]!.message).toMatch(/superseded.*`close\(\)`.*own `prefix`.*same `group`/s)
  })
})

describe('close() on the Express and Koa middleware', () => {
  it.each([
    [
      'Express',
      (middleware: ReturnType<typeof expressRateLimit>) => {
        const app = express()
        app.use(middleware)
        app.get('/', (_request, response) => {
          response.send('ok')
        })
        return app
      },
      expressRateLimit,
    ],
    [
      'Koa',
      (middleware: ReturnType<typeof koaRateLimit>) => {
        const app = new Koa()
        app.use(middleware)
        app.use((ctx) => {
          ctx.body = 'ok'
        })
        return app.callback()
      },
      koaRateLimit,
    ],
  ] as const)(
    '%s: gives the counters up; the old app, still answering, never warns',
    async (_, serve, make) => {
      warnings.length = 0
      const store = new MemoryStore()
      const oldMiddleware = make({ limit: 2, store } as never)
      const old = serve(oldMiddleware as never)
      expect((await request(old).get('/')).status).toBe(200)
      oldMiddleware.close()
      const fresh = make({ limit: 2, store } as never)
      // The old app answers again (a request in flight when the app was replaced): one count shared, no warning.
      expect((await request(old).get('/')).status).toBe(200)
      expect((await request(serve(fresh as never)).get('/')).status).toBe(429)
      await warningsSettled()
      expect(warnings).toEqual([])
      store.close()
    },
  )
})
