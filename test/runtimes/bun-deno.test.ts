/**
 * @ratewindow/hono on Bun and Deno for real (issue 22): both runtimes come from npm (devDependencies `bun` and
 * `deno`), and run hono-app.mjs (a Hono app on the runtime's own server, asked over HTTP on 127.0.0.1) against
 * the built packages: core and hono are built here as `pnpm build` builds them, into a fresh project that
 * links only `hono` and the Redis clients. Stores: memory, RedisStore over ioredis and over node-redis (the
 * suite's redis-server), and a failing store (the failure policy lets requests through, without headers).
 */
import { execFile } from 'node:child_process'
import {
  copyFileSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { promisify } from 'node:util'
import { build } from 'tsup'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { packageBuild } from '../../tsup.config.base.js'
import { redisEnvironment } from '../support/redis.js'

const run = promisify(execFile)
const root = resolve(import.meta.dirname, '../..')
let project: string

beforeAll(async () => {
  project = mkdtempSync(join(tmpdir(), 'ratewindow-runtimes-'))
  for (const name of ['core', 'hono']) {
    const dir = join(project, 'node_modules', '@ratewindow', name)
    mkdirSync(dir, { recursive: true })
    copyFileSync(join(root, 'packages', name, 'package.json'), join(dir, 'package.json'))
    await build({
      ...packageBuild,
      entry: [join(root, 'packages', name, 'src/index.ts')],
      tsconfig: join(root, 'packages', name, 'tsconfig.json'),
      outDir: join(dir, 'dist'),
      format: ['esm'],
      dts: false,
      sourcemap: false,
      external: ['@ratewindow/core', 'hono'],
      silent: true,
    })
  }
  for (const name of ['hono', 'ioredis', 'redis'])
    symlinkSync(join(root, 'node_modules', name), join(project, 'node_modules', name), 'dir')
  writeFileSync(
    join(project, 'package.json'),
    `${JSON.stringify({ private: true, type: 'module', dependencies: { '@ratewindow/hono': '*', hono: '*', ioredis: '*', redis: '*' } })}\n`,
  )
  copyFileSync(join(import.meta.dirname, 'hono-app.mjs'), join(project, 'hono-app.mjs'))
}, 120_000)

afterAll(() => {
  if (project) rmSync(project, { recursive: true, force: true })
})

const RUNTIMES = {
  Bun: [join(root, 'node_modules/.bin/bun'), 'hono-app.mjs'],
  Deno: [
    join(root, 'node_modules/.bin/deno'),
    'run',
    '--node-modules-dir=manual',
    '--allow-net=127.0.0.1',
    '--allow-read',
    '--allow-env',
    'hono-app.mjs',
  ],
} as const

interface Answer {
  status: number
  headers: Record<string, string>
  body: string
}

async function runApp(runtime: keyof typeof RUNTIMES, store: string): Promise<Answer[]> {
  const [command, ...args] = RUNTIMES[runtime]
  const port = store === 'ioredis' || store === 'node-redis' ? redisEnvironment().standalonePort : 0
  const { stdout } = await run(command, args, {
    cwd: project,
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
