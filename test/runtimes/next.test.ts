/**
 * `@ratewindow/next` in real Next.js apps, from the packed tarballs: for each entry of the matrix (Next 15
 * middleware on the Edge and on Node.js, Next 16 proxy.ts and middleware on the Edge) the app in next-app/ is
 * built once (`next build`) and served by `next start` twice, on the memory store and on Redis (chosen at start).
 * Each must answer 200s then 429 with the RateLimit headers, Retry-After and the body; key clients by the
 * X-Forwarded-For entry the proxy wrote; warn about the per-instance memory store on the Edge only; and limit a
 * route handler (`withRateLimit`) and a server action (`rateLimitAction`). The attacks that need a served app
 * (packages/next/test/next-start-attacks.ts, named by packages/next/test/hostile.test.ts) run here too, on the same
 * builds.
 *
 * Next, React and ioredis are installed once into .tmp/next-apps/<versions' hash> (gitignored; the key is the
 * lock: their exact versions, scripts/next-installs.ts, the install `pnpm check:packages` links its Next projects
 * from), the tarballs unpacked into each app; an app whose inputs (tarballs, fixture, entry) did not change since
 * its last build is not built again.
 */
import { execFile } from 'node:child_process'
import { createHash } from 'node:crypto'
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { describeNextStartAttacks } from '../../packages/next/test/next-start-attacks.js'
import { installNext, NEXT_INSTALLS, type NextMajor } from '../../scripts/next-installs.js'
import { until } from '../support/connections.js'
import { redisEnvironment, standaloneClient } from '../support/redis.js'
import { freePort, root, startServer } from './project.js'

const run = promisify(execFile)
const fixture = join(import.meta.dirname, 'next-app')

interface Entry {
  name: string
  major: NextMajor
  /** The file of next-app/entries/ that becomes the app's middleware.js or proxy.js. */
  entry: string
  file: 'middleware.js' | 'proxy.js'
  edge: boolean
}

const MATRIX: Entry[] = [
  {
    name: 'Next 15 middleware, Edge',
    major: 15,
    entry: 'middleware-edge.js',
    file: 'middleware.js',
    edge: true,
  },
  {
    name: 'Next 15 middleware, Node.js',
    major: 15,
    entry: 'middleware-node.js',
    file: 'middleware.js',
    edge: false,
  },
  { name: 'Next 16 proxy', major: 16, entry: 'proxy.js', file: 'proxy.js', edge: false },
  {
    name: 'Next 16 middleware, Edge',
    major: 16,
    entry: 'middleware-edge.js',
    file: 'middleware.js',
    edge: true,
  },
]

const sha = (...parts: (string | Buffer)[]) => {
  const hash = createHash('sha256')
  for (const part of parts) hash.update(part)
  return hash.digest('hex').slice(0, 16)
}

/** Packs core and next as they are published (`pnpm pack` of the built packages); returns the tarballs. */
async function packed(into: string): Promise<Record<'core' | 'next', string>> {
  await run(
    'pnpm',
    ['--filter', '@ratewindow/core', '--filter', '@ratewindow/next', 'pack', '--pack-destination', into],
    {
      cwd: root,
    },
  )
  const find = (name: string) =>
    join(into, readdirSync(into).find((file) => file.startsWith(`ratewindow-${name}-`))!)
  return { core: find('core'), next: find('next') }
}

/**
 * The app of `entry` in its install's apps/ directory, built unless its inputs are those of its last build. The
 * tarballs are unpacked into the app's own node_modules (Next and React come from the install's).
 */
async function builtApp(
  entry: Entry,
  tarballs: Record<'core' | 'next', string>,
  work: string,
): Promise<string> {
  const install = await installNext(entry.major)
  const app = join(install, 'apps', entry.entry.replace(/\.js$/, ''))
  const inputs = sha(
    readFileSync(tarballs.core),
    readFileSync(tarballs.next),
    ...fixtureFiles().map((file) => readFileSync(join(fixture, file))),
    entry.file,
  )
  const stamp = join(app, '.inputs')
  if (existsSync(stamp) && readFileSync(stamp, 'utf8') === inputs) return app
  rmSync(app, { recursive: true, force: true })
  mkdirSync(app, { recursive: true })
  for (const item of ['app', 'lib', 'next.config.mjs'])
    cpSync(join(fixture, item), join(app, item), { recursive: true })
  cpSync(join(fixture, 'entries', entry.entry), join(app, entry.file))
  writeFileSync(join(app, 'package.json'), '{ "private": true, "type": "module" }\n')
  for (const name of ['core', 'next'] as const) {
    const unpacked = mkdtempSync(join(work, `${name}-`))
    await run('tar', ['-xzf', tarballs[name], '-C', unpacked])
    mkdirSync(join(app, 'node_modules', '@ratewindow'), { recursive: true })
    renameSync(join(unpacked, 'package'), join(app, 'node_modules', '@ratewindow', name))
  }
  await run(process.execPath, [nextBin(app), 'build'], {
    cwd: app,
    env: { ...process.env, NEXT_TELEMETRY_DISABLED: '1', NODE_ENV: 'production' },
    maxBuffer: 16 * 1024 * 1024,
  })
  writeFileSync(stamp, inputs)
  return app
}

function fixtureFiles(dir = fixture, prefix = ''): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((item) =>
    item.isDirectory()
      ? fixtureFiles(join(dir, item.name), `${prefix}${item.name}/`)
      : [`${prefix}${item.name}`],
  )
}

const nextBin = (app: string) => join(app, '..', '..', 'node_modules', 'next', 'dist', 'bin', 'next')

interface Served {
  url: string
  output: () => string
  stop(): Promise<void>
}

/** `next start` of `app` on a free port with `env`, once it answers (bounded: 60 s). */
async function serve(app: string, env: Record<string, string>): Promise<Served> {
  const port = await freePort()
  const server = startServer(
    process.execPath,
    [nextBin(app), 'start', '-p', String(port), '-H', '127.0.0.1'],
    {
      cwd: app,
      env: { ...process.env, ...env, NEXT_TELEMETRY_DISABLED: '1', NODE_ENV: 'production', NO_COLOR: '1' },
    },
  )
  const url = `http://127.0.0.1:${port}`
  await until(
    async () => {
      if (server.child.exitCode !== null)
        throw new Error(`next start exited (${server.child.exitCode}):\n${server.output()}`)
      return fetch(`${url}/api/free`).then(
        (response) => response.ok,
        () => false,
      )
    },
    () => `next start answered on ${url} (output so far: ${server.output()})`,
    { within: 60_000, every: 100 },
  )
  return { url, output: server.output, stop: server.stop }
}

/** A GET from the client `client` behind one proxy: X-Forwarded-For as a proxy writes it (`claimed`, then `client`). */
const from = (url: string, client: string, claimed?: string) =>
  fetch(url, { headers: { 'x-forwarded-for': claimed === undefined ? client : `${claimed}, ${client}` } })

/** Calls the app's one server action as a browser does (the `Next-Action` header); returns what it returned. */
async function callAction(served: Served, app: string, client: string): Promise<Record<string, unknown>> {
  const manifest = JSON.parse(
    readFileSync(join(app, '.next', 'server', 'server-reference-manifest.json'), 'utf8'),
  )
  const [id] = Object.keys(manifest.node)
  const response = await fetch(`${served.url}/action`, {
    method: 'POST',
    headers: {
      'next-action': id!,
      accept: 'text/x-component',
      'content-type': 'text/plain;charset=UTF-8',
      'x-forwarded-for': client,
    },
    body: '[]',
  })
  expect(response.status).toBe(200)
  const returned = (await response.text()).match(/\{"allowed":[^}]*\}/)
  if (returned === null) throw new Error('the action returned no decision')
  return JSON.parse(returned[0])
}

const work = mkdtempSync(join(tmpdir(), 'ratewindow-next-'))
const apps = new Map<Entry, Promise<string>>()

beforeAll(async () => {
  const tarballs = await packed(work)
  await Promise.all((Object.keys(NEXT_INSTALLS) as unknown as NextMajor[]).map((major) => installNext(major)))
  // Two builds at a time (each is mostly one busy core), in the matrix's order: each entry's cases start as soon
  // as its own app is built, while the next ones build.
  const queue = [...MATRIX]
  let started: () => void = () => {}
  const first = new Promise<void>((resolve) => (started = resolve))
  const builder = async () => {
    for (let entry = queue.shift(); entry !== undefined; entry = queue.shift()) {
      const built = builtApp(entry, tarballs, work)
      apps.set(entry, built)
      started()
      await built.catch(() => {})
    }
  }
  void builder()
  void builder()
  await first
}, 300_000)

afterAll(() => rmSync(work, { recursive: true, force: true }))

describe.each(MATRIX)('$name', (entry) => {
  describe.each(['memory', 'redis'] as const)('on %s', (store) => {
    let app: string
    let served: Served
    const prefix = `next-test-${process.pid}-${entry.major}-${entry.entry}-${store}:`
    beforeAll(async () => {
      app = await apps.get(entry)!
      served = await serve(app, {
        STORE: store,
        REDIS_URL: `redis://127.0.0.1:${redisEnvironment().standalonePort}`,
        PREFIX: prefix,
      })
    }, 600_000)
    afterAll(() => served?.stop())

    it('limits the routes of its matcher: 200s with the RateLimit headers, then 429 with them, Retry-After and the body', async () => {
      const url = `${served.url}/api/limited`
      for (let call = 1; call <= 3; call++) {
        const response = await from(url, '203.0.113.10')
        expect(response.status).toBe(200)
        expect(response.headers.get('ratelimit-remaining')).toBe(String(3 - call))
      }
      const refused = await from(url, '203.0.113.10')
      expect(refused.status).toBe(429)
      expect(refused.headers.get('ratelimit-limit')).toBe('3')
      expect(refused.headers.get('ratelimit-remaining')).toBe('0')
      expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0)
      expect(await refused.text()).toMatch(/too many requests/i)
      const outside = await from(`${served.url}/api/free`, '203.0.113.10')
      expect(outside.status).toBe(200)
      expect(outside.headers.get('ratelimit-limit')).toBeNull()
    })

    it('keys a client by the entry its proxy wrote (trustProxy: 1), whatever the client wrote before it', async () => {
      const url = `${served.url}/api/limited`
      for (let call = 0; call < 3; call++)
        expect((await from(url, '203.0.113.20', `10.0.0.${call}`)).status).toBe(200)
      expect((await from(url, '203.0.113.20', '10.9.9.9')).status).toBe(429)
      expect((await from(url, '203.0.113.21', '203.0.113.20')).status).toBe(200)
    })

    it(
      entry.edge
        ? 'warns that the default memory store counts per Edge instance'
        : 'does not warn about a per-instance store on the Node.js runtime',
      async () => {
        const before = served.output().length
        await from(`${served.url}/api/limited`, '203.0.113.30')
        if (entry.edge)
          await until(
            () => served.output().includes('RATEWINDOW_PER_ISOLATE_STORE'),
            'the Edge warning was printed',
          )
        // The Edge route handler of the hostile cases warns too: only what this request printed counts here.
        else expect(served.output().slice(before)).not.toContain('RATEWINDOW_PER_ISOLATE_STORE')
      },
    )

    it('limits a route handler with withRateLimit, whose handler reads its decision', async () => {
      const url = `${served.url}/api/handler`
      expect(await (await from(url, '203.0.113.40')).json()).toEqual({ remaining: 1 })
      const second = await from(url, '203.0.113.40')
      expect(second.headers.get('ratelimit-remaining')).toBe('0')
      const refused = await from(url, '203.0.113.40')
      expect(refused.status).toBe(429)
      expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0)
    })

    it('limits a server action with rateLimitAction, which returns the decision', async () => {
      expect(await callAction(served, app, '203.0.113.50')).toMatchObject({ allowed: true, remaining: 1 })
      expect(await callAction(served, app, '203.0.113.50')).toMatchObject({ allowed: true, remaining: 0 })
      const refused = await callAction(served, app, '203.0.113.50')
      expect(refused.allowed).toBe(false)
      expect(refused.retryAfter).toBeGreaterThan(0)
    })

    // The attacks that need a served app (packages/next/test/hostile.test.ts names them), on this one.
    describeNextStartAttacks({ served: () => served, edge: entry.edge })

    if (store === 'redis')
      it('counted in Redis: the counters are under the prefix the server was started with', async () => {
        const keys = await standaloneClient().keys(`${prefix}*`)
        // The middleware counts in Redis only on the Node.js runtime; the route handler and action always do.
        expect(keys.length).toBeGreaterThanOrEqual(entry.edge ? 2 : 3)
      })
  })
})
