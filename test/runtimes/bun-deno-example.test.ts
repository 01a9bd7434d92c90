/**
 * The serve check of examples/hono on Bun and Deno (the docs check starts its Node entry; its preload cannot run
 * on these runtimes): each runtime, from npm, runs the command of the example's `start:bun` / `start:deno`
 * script as it stands, from the example's directory, on a free port, with the memory store and with REDIS_URL
 * (ioredis and node-redis), and must answer as the README says: 5 per 10 s per client, 3 per minute on POST
 * /login, RateLimit headers, Retry-After on a 429, and X-Forwarded-For trusted from the loopback proxy only; on
 * Redis, a second process finds the first one's counts.
 */
import { type ChildProcess, spawn } from 'node:child_process'
import { readFileSync } from 'node:fs'

import { createServer } from 'node:net'
import { join } from 'node:path'
import request from 'supertest'
import { afterEach, describe, expect, it } from 'vitest'
import { until } from '../support/connections.js'
import { redisEnvironment } from '../support/redis.js'
import { root } from './project.js'

const example = join(root, 'examples/hono')
const { scripts } = JSON.parse(readFileSync(join(example, 'package.json'), 'utf8')) as {
  scripts: Record<string, string>
}

/** A port no one listens on now (127.0.0.1). */
async function freePort(): Promise<number> {
  const server = createServer().listen(0, '127.0.0.1')
  await new Promise((resolve) => server.once('listening', resolve))
  const { port } = server.address() as { port: number }
  await new Promise((resolve) => server.close(resolve))
  return port
}

/** The script's command, with the runtime from the workspace's node_modules and the port replaced. */
function command(script: string, port: number): [string, string[]] {
  const [binary, ...args] = scripts[script]!.split(' ')
  const at = args.indexOf('--port')
  if (at >= 0) args[at + 1] = String(port)
  return [join(root, 'node_modules/.bin', binary!), args]
}

let child: ChildProcess | undefined
let output = ''

/** Whether any process of the group led by `pid` is still running. */
function groupRunning(pid: number): boolean {
  try {
    process.kill(-pid, 0)
    return true
  } catch {
    return false
  }
}

/**
 * Stops the example's whole process group: node_modules/.bin's shim runs the runtime as a child of its own, which a
 * kill of the shim alone left running. Deno's `serve` answers SIGTERM by draining open connections first (the test's
 * keep-alive pool holds some), so the group gets SIGKILL if it is still there after a bounded wait.
 */
async function stopExample(): Promise<void> {
  const running = child
  child = undefined
  if (running?.pid === undefined) return
  const group = running.pid
  if (!groupRunning(group)) return
  process.kill(-group, 'SIGTERM')
  const gone = () => !groupRunning(group)
  await until(gone, `the example's processes (group ${group}) exit after SIGTERM`, {
    within: 3_000,
    every: 50,
  }).catch(() => {
    if (groupRunning(group)) process.kill(-group, 'SIGKILL')
    return until(gone, `the example's processes (group ${group}) exit after SIGKILL`, {
      within: 5_000,
      every: 50,
    })
  })
}
afterEach(stopExample)

/** Starts `script` with `env` and resolves with its URL once it answers (bounded: 30 s). */
async function startExample(script: string, env: Record<string, string>): Promise<string> {
  const port = await freePort()
  const [binary, args] = command(script, port)
  output = ''
  child = spawn(binary, args, {
    cwd: example,
    env: { ...process.env, ...env, PORT: String(port), NO_COLOR: '1' },
    stdio: ['ignore', 'pipe', 'pipe'],
    // A process group of its own, stopped whole (stopExample).
    detached: true,
  })
  child.stdout!.on('data', (chunk) => {
    output += chunk
  })
  child.stderr!.on('data', (chunk) => {
    output += chunk
  })
  const url = `http://127.0.0.1:${port}`
  const running = child
  let answered = false
  await until(
    async () => {
      if (running.exitCode !== null) return true
      // Asked as a client of its own: the answers below count for other clients.
      answered = await fetch(url, { headers: { 'x-forwarded-for': '198.18.255.1' } }).then(
        () => true,
        () => false,
      )
      return answered
    },
    `${script} answers on ${url} (its output so far:\n${output})`,
    { within: 30_000, every: 100 },
  ).catch(() => {})
  if (answered) return url
  throw new Error(`${script} did not answer within 30 s (exit code ${running.exitCode}):\n${output}`)
}

let runs = 0

describe.each([
  ['Bun', 'start:bun'],
  ['Deno', 'start:deno'],
])('examples/hono on %s', (_, script) => {
  it.each([
    ['the memory store', {}],
    ['Redis through ioredis (REDIS_URL)', { REDIS_CLIENT: 'ioredis' }],
    ['Redis through node-redis (REDIS_URL, REDIS_CLIENT=node-redis)', { REDIS_CLIENT: 'node-redis' }],
  ])(
    `\`pnpm start:${script.split(':')[1]}\` starts and limits as the README says, on %s`,
    async (store, env) => {
      const redis =
        store === 'the memory store'
          ? {}
          : { ...env, REDIS_URL: `redis://127.0.0.1:${redisEnvironment().standalonePort}` }
      const url = await startExample(script, redis)
      // Clients of their own per run: the Redis server is shared by the runs.
      const client = (n: number) => ({ 'x-forwarded-for': `198.19.${runs}.${n}` })
      runs++
      const answers = []
      for (let i = 0; i < 6; i++) answers.push(await request(url).get('/').set(client(1)))
      expect(answers.map((answer) => answer.status)).toEqual([200, 200, 200, 200, 200, 429])
      expect(answers[0]!.body).toEqual({ hello: 'world', remaining: 4 })
      expect(answers[0]!.headers).toMatchObject({
        'ratelimit-policy': '5;w=10',
        'ratelimit-limit': '5',
        'ratelimit-remaining': '4',
      })
      expect(Number(answers[5]!.headers['retry-after'])).toBeGreaterThanOrEqual(1)
      const login = []
      for (let i = 0; i < 4; i++) login.push((await request(url).post('/login').set(client(2))).status)
      expect(login).toEqual([200, 200, 200, 429])
      // A client cannot choose another bucket by prepending an address of its own.
      const spoofed = await request(url)
        .get('/')
        .set({ 'x-forwarded-for': `198.51.100.9, ${client(1)['x-forwarded-for']}` })
      expect(spoofed.status).toBe(429)
      if (store === 'the memory store') return
      // The counts are in Redis: a second process on the same REDIS_URL still refuses the client (on /login, whose
      // minute outlasts a restart on a loaded machine; the 10 s window of / may not).
      await stopExample()
      const again = await startExample(script, redis)
      expect((await request(again).post('/login').set(client(2))).status).toBe(429)
    },
  )
})
