/**
 * @ratewindow/hono on Bun and Deno for real (issue 22): both runtimes come from npm (devDependencies `bun` and
 * `deno`), and run hono-app.mjs (a Hono app on the runtime's own server, asked over HTTP on 127.0.0.1) against
 * the built packages: core and hono are built as `pnpm build` builds them, into a fresh project (project.ts;
 * hono-suite.test.ts runs the whole HTTP suite the same way). Stores: memory, RedisStore over ioredis and over
 * node-redis (the suite's redis-server), and a failing store (the failure policy lets requests through, without
 * headers).
 */
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { redisEnvironment } from '../support/redis.js'
import { RUNTIMES as ALL_RUNTIMES, root, run, runtimeProject } from './project.js'

let project: Awaited<ReturnType<typeof runtimeProject>> | undefined

beforeAll(async () => {
  project = await runtimeProject([], ['hono-app.mjs', 'hono-gone-app.mjs'])
}, 120_000)

afterAll(() => project?.remove())

const RUNTIMES = { Bun: ALL_RUNTIMES.Bun, Deno: ALL_RUNTIMES.Deno }

interface Answer {
  status: number
  headers: Record<string, string>
  body: string
}

async function runApp(runtime: keyof typeof RUNTIMES, store: string): Promise<Answer[]> {
  const [command, ...args] = RUNTIMES[runtime]
  const port = store === 'ioredis' || store === 'node-redis' ? redisEnvironment().standalonePort : 0
  const { stdout } = await run(command, [...args, 'hono-app.mjs'], {
    cwd: project!.dir,
    timeout: 60_000,
    env: { ...process.env, STORE: store, REDIS_PORT: String(port), NO_COLOR: '1' },
  })
  const report = JSON.parse(stdout.trim().split('\n').at(-1)!) as { runtime: string; answers: Answer[] }
  expect(report.runtime).toBe(runtime.toLowerCase())
  return report.answers
}

describe.each(Object.keys(RUNTIMES) as (keyof typeof RUNTIMES)[])('@ratewindow/hono on %s', (runtime) => {
  it('the runtime is the one from npm', async () => {
    const [command] = RUNTIMES[runtime]
    const { stdout } = await run(command, ['--version'], { timeout: 30_000 })
    const pinned = JSON.parse(
      readFileSync(join(root, 'node_modules', runtime.toLowerCase(), 'package.json'), 'utf8'),
    )
    expect(stdout).toContain(pinned.version)
  })

  it.each(['memory', 'ioredis', 'node-redis'])(
    'with the %s store: 200, 200, then 429 with RateLimit headers and Retry-After, keyed by the socket',
    async (store) => {
      const answers = await runApp(runtime, store)
      expect(answers.map((answer) => answer.status)).toEqual([200, 200, 429])
      expect(answers[0]!.body).toBe('ok 127.0.0.1')
      expect(answers[0]!.headers).toMatchObject({
        'ratelimit-policy': '2;w=60',
        'ratelimit-limit': '2',
        'ratelimit-remaining': '1',
      })
      const denied = answers[2]!
      expect(denied.headers['ratelimit-remaining']).toBe('0')
      const retryAfter = Number(denied.headers['retry-after'])
      expect(retryAfter).toBeGreaterThanOrEqual(1)
      // The default sliding window counter weighs the previous window too: its wait is up to two windows, by
      // where in the window the wall clock stands (docs/algorithms.md).
      expect(retryAfter).toBeLessThanOrEqual(120)
      expect(denied.headers['ratelimit-reset']).toBe(denied.headers['retry-after'])
      expect(JSON.parse(denied.body)).toMatchObject({ error: 'Too Many Requests', retryAfter })
    },
  )

  it('with a failing store: lets requests through (the default failure policy), with no invented headers', async () => {
    const answers = await runApp(runtime, 'failing')
    expect(answers.map((answer) => answer.status)).toEqual([200, 200, 200])
    for (const answer of answers) expect(answer.headers).toEqual({})
  })
})

describe('@ratewindow/hono on Bun: a client gone before the limiter runs (issue 32, item 13)', () => {
  it('is not decided: no error in onError, nothing counted, no handler, nothing logged (10 clients)', async () => {
    const [command, ...args] = RUNTIMES.Bun
    const { stdout } = await run(command, [...args, 'hono-gone-app.mjs'], {
      cwd: project!.dir,
      timeout: 60_000,
      env: { ...process.env, NO_COLOR: '1' },
    })
    const report = JSON.parse(stdout.trim().split('\n').at(-1)!)
    expect(report).toEqual({
      entered: 11,
      passed: 11,
      aborted: 10,
      handled: 1, // the client that stayed
      errors: [],
      logged: [],
      keys: 1,
      stays: 200,
    })
  })
})
