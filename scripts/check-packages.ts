/**
 * The published packages as users get them: `pnpm pack` each package, install the tarballs with npm into fresh
 * projects (one per framework version), then typecheck small programs in ESM and CommonJS projects under
 * moduleResolution node16, nodenext and bundler, strict, with TypeScript 7 (the native port, skipLibCheck off, so
 * the packages' own .d.ts files are checked too) and TypeScript 5.9 (skipLibCheck on, as most projects set it,
 * node16 and bundler; every mode with skipLibCheck off for the projects with no @types/node: core alone, core with
 * otel, Workers), and run a tiny ESM and CJS
 * program against each tarball. Part of `pnpm test:all` (`pnpm check:packages`).
 *
 * Every project installs once from npm's cache where it can (`--prefer-offline`); its ESM and CJS sub-projects
 * share that install. Installs and checks run concurrently, at most one install and one check per core at a time,
 * and a project's checks start as soon as its install is done. Each typecheck has its own tsconfig (one program,
 * one set of options); a project's typechecks run in one `tsc -b` per TypeScript version, and each config alone
 * with `tsc -p` when that fails, so that each failure is named. `KEEP=1` keeps the work directory for a look
 * afterwards; `ONLY=<project>,…` checks those projects alone (the packing and built-in scans still run);
 * `--timings` (`pnpm check:packages --timings`) ends with a table of where the time went.
 */
import { execFile } from 'node:child_process'
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { rm } from 'node:fs/promises'
import { availableParallelism, tmpdir } from 'node:os'
import { basename, dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { build as bundle } from 'esbuild'
import { Miniflare } from 'miniflare'
import { RedisClusterProcesses, RedisServer } from '../test/support/redis-server.js'
import { describeUses, unexcusedUses } from './web-standard.js'

const run = promisify(execFile)
const root = resolve(dirname(fileURLToPath(import.meta.url)), '..')
const work = mkdtempSync(join(tmpdir(), 'ratewindow-packages-'))
/** `KEEP=1`: the work directory stays for a look. */
const keep = process.env.KEEP === '1'
const packages = [
  'core',
  'express',
  'koa',
  'fastify',
  'hono',
  'cloudflare',
  'nestjs',
  'otel',
  'prometheus',
  'admin',
  'graphql',
  'testing',
  'trpc',
  'ws',
  'next',
  'cli',
] as const
type Package = (typeof packages)[number]

/** The metadata npm pages link back with; every published package.json must carry it. */
const REQUIRED_FIELDS = ['repository', 'homepage', 'bugs', 'keywords', 'license'] as const

interface Project {
  /** Directory name under the work directory. */
  name: string
  /** Our packages installed from their tarballs. */
  tarballs: Package[]
  /** Registry packages, `name@range` (npm aliases allowed). */
  dependencies: string[]
  /** Typecheck programs: file name → source, written to both the ESM and the CJS sub-project. */
  programs: Record<string, string>
  /** Runtime programs: a `.mjs` and a `.cjs` file each, run with node. */
  runs: Record<string, string>
  /** TypeScript versions to check with. */
  typescripts: ('5.9' | '7')[]
  /** Whether the project must compile with no `@types/node` at all (core only, and core with otel). */
  noNodeTypes?: boolean
  /**
   * Skip lib checks with TypeScript 7 too, as the framework's own projects do (create-next-app sets skipLibCheck:
   * Next's declarations need the DOM lib and its compiled webpack's types, and fail lib checks whatever ours).
   */
  skipLibCheck?: boolean
  /** Compile with `experimentalDecorators` and `emitDecoratorMetadata`, as Nest projects do. */
  decorators?: boolean
  /** Typechecks left out, each for a reason of the project's own dependencies (said where it is set). */
  skip?: (check: {
    system: 'esm' | 'cjs'
    resolution: string
    version: '5.9' | '7'
    program: string
  }) => boolean
  /** Test suites run by their runner in the project: files written beside it, then `node <command>` must exit 0. */
  suites?: { name: string; files: Record<string, string>; command: string[] }[]
}

const CORE_PROGRAM = `import {
  MemoryStore,
  RateLimiter,
  RateLimitError,
  type RateLimitResult,
  rateLimitHeaders,
  slidingWindowCounter,
  tokenBucket,
} from '@ratewindow/core'
import { type FrameworkBinding, HttpRateLimiter } from '@ratewindow/core/adapter'
import { type RemoteCall, remoteShardOf } from '@ratewindow/core/remote'
import { type StoredKey, storedHash } from '@ratewindow/core/stored'
import { invalid } from '@ratewindow/core/support'

const limiter = new RateLimiter({
  rules: [slidingWindowCounter({ limit: 10, window: '1s' }), tokenBucket({ capacity: 5, refillRate: 1 })],
  store: new MemoryStore(),
  prefix: 'api',
})

export async function decide(key: string): Promise<Record<string, string>> {
  const result: RateLimitResult = await limiter.limit(key, { cost: 1 })
  const remaining: number = result.remaining
  return { ...rateLimitHeaders(result, { format: 'draft-7' }), remaining: String(remaining) }
}

export function codeOf(error: unknown): string | undefined {
  return error instanceof RateLimitError ? error.code : undefined
}

// The kits: types and values through each entry point.
const binding: FrameworkBinding<{ ip: string }> = {
  name: 'kit',
  clientIp: (request) => request.ip,
  untrustedForwardedFor: () => undefined,
  trustProxyHint: '',
}
export const engine = new HttpRateLimiter({ limit: 1 }, binding)
export const release: RemoteCall = { op: 'release', prefix: 'rw', key: 'k', id: 'lease' }
export const shard: number = remoteShardOf({ prefix: 'rw', key: 'k' }, 4)
export const hashed = (stored: StoredKey) => storedHash(stored.key)
export const refused: RateLimitError = invalid('ERR_RATEWINDOW_INVALID_OPTION', 'limit', 0, 'a whole number')
`

const EXPRESS_PROGRAM = `import express from 'express'
import { rateLimit, type RateLimitResult, type SlowDownInfo, slidingWindowLog, slowDown } from '@ratewindow/express'

const app = express()
app.set('trust proxy', 1)
app.use(rateLimit({ limit: 100, window: '1m', key: (request) => request.ip ?? 'unknown' }))
app.use(slowDown({ windowMs: 900_000, delayAfter: 5, delayMs: (used, request) => (used - 5) * (request.ip ? 100 : 200), maxDelayMs: 2000 }))
app.post(
  '/login',
  rateLimit({ rules: slidingWindowLog({ limit: 5, window: '15m' }), prefix: 'login' }),
  (request, response) => {
    const decision: RateLimitResult | undefined = request.rateLimit
    const slowed: SlowDownInfo | undefined = request.slowDown
    response.json({ remaining: decision?.remaining, delay: slowed?.delay })
  },
)
export { app }
`

const KOA_PROGRAM = `import Koa from 'koa'
import { rateLimit, type RateLimitResult, type SlowDownInfo, slowDown } from '@ratewindow/koa'

const app = new Koa()
app.use(rateLimit({ limit: 100, window: '1m', key: (ctx) => ctx.ip }))
app.use(slowDown({ delayAfter: 5, delayMs: (used, ctx) => (used - 5) * (ctx.ip ? 100 : 200), maxDelayMs: 2000 }))
app.use((ctx) => {
  const decision: RateLimitResult | undefined = ctx.state.rateLimit
  const slowed: SlowDownInfo | undefined = ctx.state.slowDown
  ctx.body = { remaining: decision?.remaining, delay: slowed?.delay }
})
export { app }
`

const HONO_PROGRAM = `import { getConnInfo } from '@hono/node-server/conninfo'
import { type RateLimitEnv, type RateLimitResult, rateLimit, type SlowDownEnv, slidingWindowLog, slowDown } from '@ratewindow/hono'
import { Hono } from 'hono'

const app = new Hono<RateLimitEnv & SlowDownEnv>()
app.use(rateLimit({ limit: 100, window: '1m', getConnInfo, trustProxy: 1 }))
app.use(slowDown({ delayAfter: 5, delayMs: (used, c) => (used - 5) * (c.req.header('x-user') ? 100 : 200), getConnInfo }))
app.get('/slow', (c) => c.json({ delay: c.get('slowDown')?.delay }))
app.post(
  '/login',
  rateLimit({ rules: slidingWindowLog({ limit: 5, window: '15m' }), prefix: 'login', key: (c) => c.req.header('x-user') ?? 'anonymous' }),
  (c) => {
    const decision: RateLimitResult | undefined = c.get('rateLimit')
    return c.json({ remaining: decision?.remaining })
  },
)
export { app }
`

/**
 * A Worker with the Durable Object store, typed by @cloudflare/workers-types (no @types/node): the runtime's
 * binding type must fit the store's structural `namespace`, directly and through a function.
 */
const CLOUDFLARE_PROGRAM = `/// <reference types="@cloudflare/workers-types" />
import { DurableObjectStore, RateLimiterObject } from '@ratewindow/cloudflare'
import { type RateLimitEnv, rateLimit } from '@ratewindow/hono'
import { Hono } from 'hono'

// NOTE: not getConnInfo from 'hono/cloudflare-workers' here: that module's WebSocket types need the DOM lib,
// which a project typed by @cloudflare/workers-types lacks (Hono's own declarations, with skipLibCheck off).
const clientIp = (c: { req: { header(name: string): string | undefined } }) => c.req.header('cf-connecting-ip')

interface Bindings {
  RATE_LIMITER: DurableObjectNamespace
}
let bindings: Bindings | undefined
const store = new DurableObjectStore({ namespace: () => bindings!.RATE_LIMITER, objects: 8 })
export const direct = (env: Bindings) => new DurableObjectStore({ namespace: env.RATE_LIMITER })

const app = new Hono<RateLimitEnv & { Bindings: Bindings }>()
app.use(async (c, next) => {
  bindings = c.env
  await next()
})
app.use(rateLimit({ limit: 100, window: '1m', store, clientIp }))
app.get('/', (c) => c.json({ remaining: c.get('rateLimit')?.remaining }))

export { RateLimiterObject }
export default app
`

const FASTIFY_PROGRAM = `import Fastify from 'fastify'
import { rateLimit, type RateLimitResult, type SlowDownInfo, slidingWindowLog, slowDown } from '@ratewindow/fastify'

export async function build() {
  const app = Fastify()
  await app.register(rateLimit, { limit: 100, window: '1m', key: (request) => request.ip })
  app.addHook('onRequest', slowDown({ delayAfter: 5, delayMs: (used, request) => (used - 5) * (request.ip ? 100 : 200) }))
  app.get('/slow', async (request) => {
    const slowed: SlowDownInfo | undefined = request.slowDown
    return { delay: slowed?.delay }
  })
  app.get('/', async (request) => {
    const decision: RateLimitResult | null = request.rateLimit
    return { remaining: decision?.remaining }
  })
  app.post(
    '/login',
    { config: { ratewindow: { rules: slidingWindowLog({ limit: 5, window: '15m' }) } } },
    async () => 'ok',
  )
  app.get('/health', { config: { ratewindow: false } }, async () => 'up')
  return app
}
`

/** A Nest app as Nest projects write one: constructor injection by type (decorator metadata), the decorators. */
const NEST_PROGRAM = `import { Controller, Get, Module, Post, Req } from '@nestjs/common'
import { APP_GUARD } from '@nestjs/core'
import {
  type NestHttpRequest,
  RateLimit,
  RateLimitException,
  RateLimitInfo,
  type RateLimitResult,
  RateWindowGuard,
  RateWindowModule,
  RateWindowService,
  SkipRateLimit,
  slidingWindowLog,
} from '@ratewindow/nestjs'

@Controller()
export class AppController {
  constructor(private readonly limits: RateWindowService) {}

  @Get()
  hello(@RateLimitInfo() decision: RateLimitResult | undefined): { remaining: number | undefined } {
    return { remaining: decision?.remaining }
  }

  @Post('login')
  @RateLimit({ rules: slidingWindowLog({ limit: 5, window: '15m' }) })
  async login(@Req() request: NestHttpRequest): Promise<string> {
    await this.limits.reset(request)
    return 'ok'
  }

  @Get('health')
  @SkipRateLimit()
  health(): string {
    return 'up'
  }
}

@Module({
  imports: [
    RateWindowModule.forRootAsync({
      useFactory: () => ({ limit: 100, window: '1m', perRoute: false }),
    }),
  ],
  controllers: [AppController],
  providers: [{ provide: APP_GUARD, useClass: RateWindowGuard }],
})
export class AppModule {}

export const statusOf = (error: unknown): number | undefined =>
  error instanceof RateLimitException ? error.getStatus() : undefined
`

/** @nestjs/throttler as it is, on our storage: `ThrottlerStore` fits its `storage` option. */
const NEST_THROTTLER_PROGRAM = `import { Module } from '@nestjs/common'
import { ThrottlerModule } from '@nestjs/throttler'
import { ThrottlerStore } from '@ratewindow/nestjs/throttler'

@Module({
  imports: [ThrottlerModule.forRoot({ throttlers: [{ limit: 10, ttl: 60_000 }], storage: new ThrottlerStore() })],
})
export class AppModule {}
`

/** A gateway limited by `@ratewindow/nestjs/websockets` (Nest 12): the entry resolves with @nestjs/websockets alone. */
const NEST_WEBSOCKETS_PROGRAM = `import type { IncomingMessage } from 'node:http'
import { Module, UseGuards } from '@nestjs/common'
import { MessageBody, SubscribeMessage, WebSocketGateway } from '@nestjs/websockets'
import { RateLimit, RateWindowModule } from '@ratewindow/nestjs'
import { RateWindowWsGuard, RateWindowWsModule, rememberHandshake } from '@ratewindow/nestjs/websockets'

@WebSocketGateway()
@UseGuards(RateWindowWsGuard)
class ChatGateway {
  handleConnection(client: object, request: IncomingMessage) {
    rememberHandshake(client, request)
  }

  @RateLimit({ limit: 20, window: '10s' })
  @SubscribeMessage('chat')
  chat(@MessageBody() text: string) {
    return { echo: text }
  }
}

@Module({
  imports: [RateWindowModule.forRoot({ limit: 100, window: '1m' }), RateWindowWsModule.forRoot({ onLimit: 'drop' })],
  providers: [ChatGateway],
})
export class AppModule {}
`

/** A gradual migration: @fastify/rate-limit on one part of the app, @ratewindow/fastify on another. */
const FASTIFY_MIGRATION_PROGRAM = `import Fastify from 'fastify'
import fastifyRateLimit from '@fastify/rate-limit'
import { rateLimit } from '@ratewindow/fastify'

export async function build() {
  const app = Fastify()
  await app.register(async (legacy) => {
    await legacy.register(fastifyRateLimit, { max: 100, timeWindow: '1 minute' })
    legacy.get('/old', async () => 'old')
    legacy.get('/old/login', { config: { rateLimit: { max: 5, timeWindow: '15 minutes' } } }, async () => 'ok')
  })
  await app.register(async (migrated) => {
    await migrated.register(rateLimit, { limit: 100, window: '1m' })
    migrated.get('/new', async (request) => ({ remaining: request.rateLimit?.remaining }))
    migrated.get('/new/login', { config: { ratewindow: { limit: 5, window: '15m' } } }, async () => 'ok')
    migrated.get('/new/health', { config: { ratewindow: false } }, async () => 'up')
  })
  // Both on one instance, each route keyed for one of them.
  await app.register(async (both) => {
    await both.register(fastifyRateLimit, { global: false, max: 100, timeWindow: '1 minute' })
    await both.register(rateLimit, { global: false, limit: 100, window: '1m' })
    both.get('/both/old', { config: { rateLimit: { max: 5 } } }, async () => 'old')
    both.get('/both/new', { config: { ratewindow: { limit: 5 } } }, async () => 'new')
  })
  return app
}
`

/** @ratewindow/otel beside core: the observer on a limiter, its options and its exported buckets. */
const OTEL_PROGRAM = `import { metrics } from '@opentelemetry/api'
import { fixedWindow, RateLimiter } from '@ratewindow/core'
import { type RateLimitMetricsOptions, rateLimitMetrics, STORE_DURATION_BUCKETS } from '@ratewindow/otel'

const options: RateLimitMetricsOptions = { meterProvider: metrics.getMeterProvider(), meterName: 'app' }
export const limiter = new RateLimiter({
  rules: fixedWindow({ limit: 10, window: '1m' }),
  name: 'api',
  observer: rateLimitMetrics(options),
})
export const buckets: readonly number[] = STORE_DURATION_BUCKETS
`

/** Runtime check of @ratewindow/otel: three decisions, collected through the SDK, counted by outcome. */
function otelRun(moduleSystem: 'esm' | 'cjs'): string {
  const load = (name: string) => (moduleSystem === 'esm' ? `(await import('${name}'))` : `require('${name}')`)
  return `async function main() {
  const { RateLimiter, fixedWindow } = ${load('@ratewindow/core')}
  const { rateLimitMetrics } = ${load('@ratewindow/otel')}
  const { MeterProvider, MetricReader } = ${load('@opentelemetry/sdk-metrics')}
  class Reader extends MetricReader {
    async onForceFlush() {}
    async onShutdown() {}
  }
  const reader = new Reader()
  const meterProvider = new MeterProvider({ readers: [reader] })
  const limiter = new RateLimiter({
    rules: fixedWindow({ limit: 2, window: '1m' }),
    name: 'api',
    observer: rateLimitMetrics({ meterProvider }),
  })
  for (let i = 0; i < 3; i++) await limiter.limit('k')
  const { resourceMetrics } = await reader.collect()
  const decisions = resourceMetrics.scopeMetrics
    .flatMap((scope) => scope.metrics)
    .find((metric) => metric.descriptor.name === 'ratewindow.decisions')
  const counts = Object.fromEntries(
    (decisions?.dataPoints ?? []).map((point) => [point.attributes['ratewindow.outcome'], point.value]),
  )
  if (counts.allowed !== 2 || counts.limited !== 1) throw new Error('decisions ' + JSON.stringify(counts))
  console.log('ok')
}
main().catch((error) => { console.error(error); process.exit(1) })
`
}

/** @ratewindow/prometheus beside core: the observer on a limiter, with the application's registry. */
const PROMETHEUS_PROGRAM = `import { fixedWindow, RateLimiter } from '@ratewindow/core'
import { type PrometheusMetricsOptions, prometheusMetrics, STORE_DURATION_BUCKETS } from '@ratewindow/prometheus'
import { Registry } from 'prom-client'

const options: PrometheusMetricsOptions = { registry: new Registry(), maxLabelValues: 50 }
export const limiter = new RateLimiter({
  rules: fixedWindow({ limit: 10, window: '1m' }),
  name: 'api',
  observer: prometheusMetrics(options),
})
export const buckets: readonly number[] = STORE_DURATION_BUCKETS
`

/** Runtime check of @ratewindow/prometheus: three decisions, read back from the registry's exposition text. */
function prometheusRun(moduleSystem: 'esm' | 'cjs'): string {
  const load = (name: string) => (moduleSystem === 'esm' ? `(await import('${name}'))` : `require('${name}')`)
  return `async function main() {
  const { RateLimiter, fixedWindow } = ${load('@ratewindow/core')}
  const { prometheusMetrics } = ${load('@ratewindow/prometheus')}
  const { Registry } = ${load('prom-client')}
  const registry = new Registry()
  const limiter = new RateLimiter({
    rules: fixedWindow({ limit: 2, window: '1m', name: 'minute' }),
    name: 'api',
    observer: prometheusMetrics({ registry }),
  })
  for (let i = 0; i < 3; i++) await limiter.limit('k')
  const text = await registry.metrics()
  for (const line of [
    'ratewindow_decisions_total{limiter="api",rule="minute",outcome="allowed",route=""} 2',
    'ratewindow_decisions_total{limiter="api",rule="minute",outcome="limited",route=""} 1',
  ]) {
    if (!text.includes(line)) throw new Error('missing ' + line + ' in\\n' + text)
  }
  console.log('ok')
}
main().catch((error) => { console.error(error); process.exit(1) })
`
}

/** @ratewindow/cli's library face: `run`, the exit codes, the config and `--json` types. */
const CLI_PROGRAM = `import { type CliConfig, EXIT, type ExitCode, type InspectJson, run, type TopJson } from '@ratewindow/cli'
import { fixedWindow } from '@ratewindow/core'

export const config: CliConfig = {
  limiters: [{ name: 'api', rules: [fixedWindow({ limit: 100, window: '1m' })], overrides: true }, { limit: 5, window: '15m' }],
}
export const code: Promise<ExitCode> = run(['--help'], { stdout: () => {} })
export const usage: ExitCode = EXIT.usage
export const rows = (top: TopJson, inspected: InspectJson): number => top.keys.length + inspected.limiters.length
`

/**
 * Runtime check of @ratewindow/cli: run() answers help (0) and a usage error (2) through the library, and the
 * installed binary answers --help (no Redis needed for either).
 */
function cliRun(moduleSystem: 'esm' | 'cjs'): string {
  const load = (name: string) => (moduleSystem === 'esm' ? `(await import('${name}'))` : `require('${name}')`)
  return `async function main() {
  const { run, EXIT } = ${load('@ratewindow/cli')}
  const { execFileSync } = ${load('node:child_process')}
  const { createRequire } = ${load('node:module')}
  const { dirname, join } = ${load('node:path')}
  const out = []
  if ((await run(['--help'], { stdout: (text) => out.push(text) })) !== EXIT.ok) throw new Error('--help did not exit 0')
  if (!out.join('').includes('ratewindow top')) throw new Error('--help lacks top: ' + out.join(''))
  if ((await run(['frobnicate'], { stderr: () => {} })) !== EXIT.usage) throw new Error('a usage error did not exit 2')
  const manifest = createRequire(join(process.cwd(), 'x.js')).resolve('@ratewindow/cli/package.json')
  const bin = join(dirname(manifest), ${load('node:fs')}.readFileSync(manifest, 'utf8').match(/"ratewindow": "([^"]+)"/)[1])
  if (!execFileSync(process.execPath, [bin, '--help'], { encoding: 'utf8' }).includes('Exit codes')) throw new Error('the bin did not answer --help')
  console.log('ok')
}
main().catch((error) => { console.error(error); process.exit(1) })
`
}

/** @ratewindow/admin: the handler with its stats, and each framework's mount, typed against the frameworks' own types. */
const ADMIN_PROGRAM = `import { fixedWindow, MemoryStore, RateLimiter } from '@ratewindow/core'
import { type AdminHandler, type AdminStatsView, adminHandler, adminStats } from '@ratewindow/admin'
import { expressAdmin } from '@ratewindow/admin/express'
import { fastifyAdmin } from '@ratewindow/admin/fastify'
import { honoAdmin } from '@ratewindow/admin/hono'
import { nestAdmin } from '@ratewindow/admin/nestjs'
import express from 'express'
import fastify from 'fastify'
import { Hono } from 'hono'

const stats = adminStats({ capacity: 100 })
const api = new RateLimiter({
  rules: fixedWindow({ limit: 10, window: '1m' }),
  store: new MemoryStore(),
  name: 'api',
  overrides: true,
  observer: stats,
})
export const admin: AdminHandler = adminHandler({
  limiters: [api],
  authorize: (request: Request) => request.headers.get('authorization') === 'Bearer t' && 'ops',
  stats,
  basePath: '/_ratewindow',
})
export const view: AdminStatsView = stats.view(10)
express().use(expressAdmin(admin))
new Hono().use(honoAdmin(admin))
export const registered = fastify().register(fastifyAdmin(admin))
export const nest: (request: import('node:http').IncomingMessage, response: import('node:http').ServerResponse, next: () => void) => unknown = nestAdmin(admin)
`

/**
 * The Koa mount, in a project of its own: beside Express 5, npm hoists content-disposition 1 (typed), whose types
 * @types/koa cannot read under TypeScript 7's lib checks.
 */
const ADMIN_KOA_PROGRAM = `import { adminHandler } from '@ratewindow/admin'
import { koaAdmin } from '@ratewindow/admin/koa'
import { RateLimiter, fixedWindow } from '@ratewindow/core'
import Koa from 'koa'

const api = new RateLimiter({ rules: fixedWindow({ limit: 10, window: '1m' }), name: 'api' })
export const app = new Koa().use(koaAdmin(adminHandler({ limiters: [api], authorize: () => true })))
`

/**
 * Runtime check of @ratewindow/admin on Express: refused without the token, a key blocked through HTTP and refused at
 * its next decision, then /stats counting that refusal.
 */
function adminRun(moduleSystem: 'esm' | 'cjs'): string {
  const load = (name: string) => (moduleSystem === 'esm' ? `(await import('${name}'))` : `require('${name}')`)
  return `async function main() {
  const { RateLimiter, fixedWindow } = ${load('@ratewindow/core')}
  const { adminHandler, adminStats } = ${load('@ratewindow/admin')}
  const { expressAdmin } = ${load('@ratewindow/admin/express')}
  const express = ${load('express')}.default ?? ${load('express')}
  const stats = adminStats()
  const api = new RateLimiter({ rules: fixedWindow({ limit: 5, window: '1m' }), name: 'api', overrides: true, observer: stats })
  const admin = adminHandler({ limiters: [api], authorize: (request) => request.headers.get('authorization') === 'Bearer t' && 'ops', stats, basePath: '/_rw' })
  const app = express()
  app.use(expressAdmin(admin))
  const server = app.listen(0, '127.0.0.1')
  await new Promise((resolve) => server.once('listening', resolve))
  const base = 'http://127.0.0.1:' + server.address().port + '/_rw'
  const auth = { authorization: 'Bearer t', 'content-type': 'application/json' }
  const refused = await fetch(base + '/limiters')
  const blocked = await fetch(base + '/limiters/api/keys/k%2F1/block', { method: 'POST', headers: auth, body: '{"for":"1h"}' })
  const decision = await api.limit('k/1')
  const view = await (await fetch(base + '/stats', { headers: auth })).json()
  server.close()
  const seen = [refused.status, blocked.status, decision.allowed, view.refused[0] && view.refused[0].key].join()
  if (seen !== '401,200,false,k/1') throw new Error('admin ' + seen)
  console.log('ok')
}
main().catch((error) => { console.error(error); process.exit(1) })
`
}

/** @ratewindow/next's three entry points, typed against Next's own `NextRequest`. */
const NEXT_PROGRAM = `import {
  type ActionDecision,
  rateLimit,
  rateLimitAction,
  rateLimitOf,
  withRateLimit,
} from '@ratewindow/next'
import type { NextRequest } from 'next/server.js'

export const proxy = rateLimit({
  limit: 100,
  window: '1m',
  key: (request: NextRequest) => request.cookies.get('session')?.value ?? 'anonymous',
})

export const config = { matcher: '/api/:path*' }

export const POST = withRateLimit(
  async (request: Request) => Response.json({ remaining: rateLimitOf(request)?.remaining }),
  { limit: 10, window: '1m', trustProxy: 1, skipFailedRequests: true },
)

const limit = rateLimitAction({ limit: 5, window: '10m', trustProxy: 1 })

export async function subscribe(headers: Headers): Promise<ActionDecision> {
  return limit(headers)
}
`

/**
 * Runtime check of @ratewindow/next outside a Next build (as a test of one's middleware runs it): limit 1 behind
 * one proxy; the first request goes on (`x-middleware-next`) with the headers, the second gets 429.
 */
function nextRun(moduleSystem: 'esm' | 'cjs'): string {
  const load = (name: string) => (moduleSystem === 'esm' ? `(await import('${name}'))` : `require('${name}')`)
  return `async function main() {
  const { rateLimit } = ${load('@ratewindow/next')}
  const { NextRequest } = ${load('next/server.js')}
  const middleware = rateLimit({ limit: 1, window: '1m', trustProxy: 1 })
  const request = () => new NextRequest('http://localhost/api', { headers: { 'x-forwarded-for': '203.0.113.7' } })
  const first = await middleware(request())
  const second = await middleware(request())
  if (first.headers.get('x-middleware-next') !== '1' || first.headers.get('ratelimit-remaining') !== '0')
    throw new Error('first ' + JSON.stringify([...first.headers]))
  if (second.status !== 429 || !second.headers.get('retry-after')) throw new Error('second ' + second.status)
  console.log('ok')
}
main().catch((error) => { console.error(error); process.exit(1) })
`
}

/** @ratewindow/ws on the servers of its main entry: ws, and @fastify/websocket through it. */
const WS_PROGRAM = `import { createServer } from 'node:http'
import fastifyWebsocket from '@fastify/websocket'
import { fixedWindow } from '@ratewindow/core'
import { limitWebSockets, type MessageRefusal, type WebSocketLimits } from '@ratewindow/ws'
import Fastify from 'fastify'
import { WebSocketServer } from 'ws'

export const limits: WebSocketLimits = limitWebSockets({
  upgrade: { limit: 30, window: '1m' },
  connections: { limit: 3 },
  messagesPerConnection: { rules: fixedWindow({ limit: 20, window: '1s' }) },
  cost: ({ data }) => (Array.isArray(data) ? data.length : 1),
  errorMessage: (refusal: MessageRefusal) => refusal.reason,
})
const wss = new WebSocketServer({ noServer: true })
createServer().on('upgrade', limits.handleUpgrade(wss))

export async function fastify() {
  const app = Fastify()
  await app.register(fastifyWebsocket)
  app.addHook('onRequest', limits.fastify)
  app.get('/ws', { websocket: true }, (socket) => {
    socket.on('message', () => socket.send('ok'))
  })
  return app
}
`

/** @ratewindow/ws/hono with @hono/node-ws. */
const WS_HONO_PROGRAM = `import { getConnInfo } from '@hono/node-server/conninfo'
import { createNodeWebSocket } from '@hono/node-ws'
import { fixedWindow } from '@ratewindow/core'
import { type HonoWebSocketLimits, limitHonoWebSockets } from '@ratewindow/ws/hono'
import { Hono } from 'hono'

const app = new Hono()
const { upgradeWebSocket } = createNodeWebSocket({ app })
export const limits: HonoWebSocketLimits = limitHonoWebSockets({
  getConnInfo,
  messagesPerKey: { rules: fixedWindow({ limit: 20, window: '1s' }) },
  onLimit: 'close',
})
app.get('/ws', limits.upgrade, upgradeWebSocket(limits.events(() => ({ onMessage: (event, ws) => ws.send(String(event.data)) }))))
export { app }
`

/** @ratewindow/ws/socket.io in a project with Socket.IO alone: no ws types, no Hono. */
const SOCKET_IO_PROGRAM = `import { createServer } from 'node:http'
import { fixedWindow } from '@ratewindow/core'
import { limitSocketIo, type SocketIoLimits } from '@ratewindow/ws/socket.io'
import { Server } from 'socket.io'

const io = new Server(createServer())
export const limits: SocketIoLimits = limitSocketIo(io, {
  connections: { limit: 3 },
  messagesPerConnection: { rules: fixedWindow({ limit: 20, window: '1s' }) },
  cost: ({ event }) => (event === 'upload' ? 5 : 1),
})
`

/**
 * Runtime check of @ratewindow/ws: a ws server limited to 2 messages per connection; a client sends 3, and sees
 * 2 echoes and 1 error frame (reason "limit").
 */
function wsRun(moduleSystem: 'esm' | 'cjs'): string {
  const load = (name: string) => (moduleSystem === 'esm' ? `(await import('${name}'))` : `require('${name}')`)
  return `async function main() {
  const { createServer } = ${load('node:http')}
  const { fixedWindow } = ${load('@ratewindow/core')}
  const { limitWebSockets } = ${load('@ratewindow/ws')}
  const { WebSocket, WebSocketServer } = ${load('ws')}
  const limits = limitWebSockets({ messagesPerConnection: { rules: fixedWindow({ limit: 2, window: '1m' }) } })
  const wss = new WebSocketServer({ noServer: true })
  wss.on('connection', (socket) => socket.on('message', (data) => socket.send('echo ' + data)))
  const server = createServer()
  server.on('upgrade', limits.handleUpgrade(wss))
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
  const client = new WebSocket('ws://127.0.0.1:' + server.address().port)
  const frames = []
  await new Promise((resolve, reject) => {
    client.on('error', reject)
    client.on('open', () => ['a', 'b', 'c'].forEach((text) => client.send(text)))
    client.on('message', (data) => {
      frames.push(String(data))
      if (frames.length === 3) resolve()
    })
  })
  client.close()
  server.close()
  if (frames[0] !== 'echo a' || frames[1] !== 'echo b' || JSON.parse(frames[2]).reason !== 'limit')
    throw new Error('frames ' + JSON.stringify(frames))
  console.log('ok')
}
main().catch((error) => { console.error(error); process.exit(1) })
`
}

/**
 * Runtime check of @ratewindow/ws/socket.io: 3 messages per connection, its namespace CONNECT one of them; a client
 * emits 3 events with acknowledgements and gets 2 answers and 1 refusal.
 */
function socketIoRun(moduleSystem: 'esm' | 'cjs'): string {
  const load = (name: string) => (moduleSystem === 'esm' ? `(await import('${name}'))` : `require('${name}')`)
  return `async function main() {
  const { createServer } = ${load('node:http')}
  const { fixedWindow } = ${load('@ratewindow/core')}
  const { limitSocketIo } = ${load('@ratewindow/ws/socket.io')}
  const { Server } = ${load('socket.io')}
  const { io: connect } = ${load('socket.io-client')}
  const server = createServer()
  const io = new Server(server)
  limitSocketIo(io, { messagesPerConnection: { rules: fixedWindow({ limit: 3, window: '1m' }) } })
  io.on('connection', (socket) => socket.on('chat', (text, ack) => ack('echo ' + text)))
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
  const client = connect('http://127.0.0.1:' + server.address().port, { transports: ['websocket'] })
  const answers = await Promise.all(['a', 'b', 'c'].map((text) => new Promise((resolve) => client.emit('chat', text, resolve))))
  client.close()
  await io.close()
  if (answers[0] !== 'echo a' || answers[1] !== 'echo b' || answers[2].reason !== 'limit')
    throw new Error('answers ' + JSON.stringify(answers))
  console.log('ok')
}
main().catch((error) => { console.error(error); process.exit(1) })
`
}

/** Runtime checks: each prints `ok` after seeing the limit applied (third request denied). */
type Framework = 'express' | 'koa' | 'fastify' | 'hono' | 'nestjs-express' | 'nestjs-fastify'

/** A Nest app in plain JavaScript: decorators applied as functions. */
function nestSetup(load: (name: string) => string, platform: 'express' | 'fastify'): string {
  return `${load('reflect-metadata')}
  const { Controller, Get, Module } = ${load('@nestjs/common')}
  const { APP_GUARD, NestFactory } = ${load('@nestjs/core')}
  const { RateWindowGuard, RateWindowModule } = ${load('@ratewindow/nestjs')}
  class AppController {
    hello() { return 'hi' }
  }
  Get()(AppController.prototype, 'hello', Object.getOwnPropertyDescriptor(AppController.prototype, 'hello'))
  Controller()(AppController)
  class AppModule {}
  Module({
    imports: [RateWindowModule.forRoot({ limit: 2, window: '1m' })],
    controllers: [AppController],
    providers: [{ provide: APP_GUARD, useClass: RateWindowGuard }],
  })(AppModule)
  ${platform === 'fastify' ? `const { FastifyAdapter } = ${load('@nestjs/platform-fastify')}\n  const app = await NestFactory.create(AppModule, new FastifyAdapter(), { logger: false })` : `const app = await NestFactory.create(AppModule, { logger: false })`}
  await app.listen(0, '127.0.0.1')
  const port = app.getHttpServer().address().port
  const close = () => app.close()`
}

function serverRun(moduleSystem: 'esm' | 'cjs', framework: Framework): string {
  const load = (name: string) => (moduleSystem === 'esm' ? `(await import('${name}'))` : `require('${name}')`)
  const setup = {
    express: `const express = ${load('express')}.default ?? ${load('express')}
  const { rateLimit } = ${load('@ratewindow/express')}
  const app = express()
  app.use(rateLimit({ limit: 2, window: '1m' }))
  app.get('/', (_req, res) => { res.send('hi') })
  const server = await new Promise((resolve) => { const s = app.listen(0, '127.0.0.1', () => resolve(s)) })
  const port = server.address().port
  const close = () => server.close()`,
    koa: `const Koa = ${load('koa')}.default ?? ${load('koa')}
  const { rateLimit } = ${load('@ratewindow/koa')}
  const app = new Koa()
  app.use(rateLimit({ limit: 2, window: '1m' }))
  app.use((ctx) => { ctx.body = 'hi' })
  const server = await new Promise((resolve) => { const s = app.listen(0, '127.0.0.1', () => resolve(s)) })
  const port = server.address().port
  const close = () => server.close()`,
    hono: `const { Hono } = ${load('hono')}
  const { serve } = ${load('@hono/node-server')}
  const { getConnInfo } = ${load('@hono/node-server/conninfo')}
  const { rateLimit } = ${load('@ratewindow/hono')}
  const app = new Hono()
  app.use(rateLimit({ limit: 2, window: '1m', getConnInfo }))
  app.get('/', (c) => c.text('hi'))
  const server = await new Promise((resolve) => { const s = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }, () => resolve(s)) })
  const port = server.address().port
  const close = () => server.close()`,
    fastify: `const Fastify = ${load('fastify')}.default ?? ${load('fastify')}
  const { rateLimit } = ${load('@ratewindow/fastify')}
  const app = Fastify()
  await app.register(rateLimit, { limit: 2, window: '1m' })
  app.get('/', async () => 'hi')
  await app.listen({ port: 0, host: '127.0.0.1' })
  const port = app.server.address().port
  const close = () => app.close()`,
    'nestjs-express': nestSetup(load, 'express'),
    'nestjs-fastify': nestSetup(load, 'fastify'),
  }[framework]
  return `async function main() {
  ${setup}
  const statuses = []
  for (let i = 0; i < 3; i++) statuses.push((await fetch('http://127.0.0.1:' + port + '/')).status)
  await close()
  if (statuses.join() !== '200,200,429') throw new Error('statuses ' + statuses.join())
  console.log('ok')
}
main().catch((error) => { console.error(error); process.exit(1) })
`
}

/**
 * Runtime check of @ratewindow/cloudflare in Node: a RateLimiterObject on an in-memory storage, reached through a
 * namespace whose stub hands each fetch to it, decides for a RateLimiter: allowed, allowed, denied.
 */
function cloudflareRun(moduleSystem: 'esm' | 'cjs'): string {
  const load = (name: string) => (moduleSystem === 'esm' ? `(await import('${name}'))` : `require('${name}')`)
  return `async function main() {
  const { RateLimiter, fixedWindow } = ${load('@ratewindow/core')}
  const { DurableObjectStore, RateLimiterObject } = ${load('@ratewindow/cloudflare')}
  const data = new Map()
  const storage = {
    get: async (key) => structuredClone(data.get(key)),
    put: async (key, value) => void data.set(key, structuredClone(value)),
    delete: async (key) => data.delete(key),
    list: async () => new Map(data),
    getAlarm: async () => null,
    setAlarm: async () => {},
  }
  const object = new RateLimiterObject({ storage }, {})
  const namespace = { idFromName: (name) => name, get: () => ({ fetch: (url, init) => object.fetch(new Request(url, init)) }) }
  const limiter = new RateLimiter({ rules: fixedWindow({ limit: 2, window: '1m' }), store: new DurableObjectStore({ namespace }) })
  const allowed = []
  for (let i = 0; i < 3; i++) allowed.push((await limiter.limit('k')).allowed)
  if (allowed.join() !== 'true,true,false') throw new Error('allowed ' + allowed.join())
  console.log('ok')
}
main().catch((error) => { console.error(error); process.exit(1) })
`
}

/**
 * The Worker that workerd runs from the installed tarballs (project cloudflare-workers): Hono with the Durable
 * Object store, bundled as wrangler bundles, with no compatibility flag; with overrides, operated from admin
 * routes (registered before the limiter, so not limited) as a support desk would.
 */
const WORKERD_APP = `import { DurableObjectStore, RateLimiterObject } from '@ratewindow/cloudflare'
import { rateLimit } from '@ratewindow/hono'
import { Hono } from 'hono'
import { getConnInfo } from 'hono/cloudflare-workers'

let bindings
const store = new DurableObjectStore({ namespace: () => bindings.RATE_LIMITER })
const limiter = rateLimit({ limit: 2, window: '1m', store, getConnInfo, name: 'api', overrides: true })
const app = new Hono()
app.use(async (c, next) => {
  bindings = c.env
  await next()
})
app.post('/admin/:key/raise', async (c) => {
  await limiter.overrides.set(c.req.param('key'), { limit: 4 })
  return c.text('raised')
})
app.post('/admin/:key/block', async (c) => {
  const block = await limiter.overrides.block(c.req.param('key'), { for: '1h', reason: 'ticket 5521' })
  return c.json(block)
})
app.use(limiter)
app.get('/', (c) => c.text(typeof globalThis.process + ' ' + navigator.userAgent))
export { RateLimiterObject }
export default app
`

/**
 * Bundles WORKERD_APP in the project and asks it in workerd: 200, 200, 429, with no Node globals; then, from the
 * admin routes, an override raises the client's limit to 4 (200, 200, 429 again) and a block refuses it at once.
 */
async function runInWorkerd(dir: string): Promise<void> {
  writeFileSync(join(dir, 'workerd-app.mjs'), WORKERD_APP)
  const { outputFiles } = await bundle({
    entryPoints: [join(dir, 'workerd-app.mjs')],
    absWorkingDir: dir,
    bundle: true,
    format: 'esm',
    platform: 'neutral',
    conditions: ['workerd', 'worker', 'browser'],
    mainFields: ['browser', 'module', 'main'],
    external: ['cloudflare:*'],
    write: false,
    logLevel: 'silent',
  })
  const mf = new Miniflare({
    modules: [{ type: 'ESModule', path: 'worker.js', contents: outputFiles[0]!.text }],
    compatibilityDate: '2025-09-01',
    compatibilityFlags: [],
    durableObjects: { RATE_LIMITER: { className: 'RateLimiterObject', useSQLite: true } },
  })
  const ask = async (path = '/', method = 'GET') => {
    const response = await mf.dispatchFetch(`http://worker.test${path}`, {
      method,
      headers: { 'CF-Connecting-IP': '203.0.113.7' },
    })
    return `${response.status} ${await response.text()}`
  }
  try {
    const answers: string[] = []
    for (let i = 0; i < 3; i++) answers.push(await ask())
    if (
      answers[0] !== '200 undefined Cloudflare-Workers' ||
      answers[1]?.slice(0, 3) !== '200' ||
      answers[2]?.slice(0, 3) !== '429'
    )
      throw new Error(`answers ${JSON.stringify(answers)}`)
    // The client's key is its address. Raised to 4 with 2 used: two more, then refused; blocked: refused at once.
    const operated = [await ask('/admin/203.0.113.7/raise', 'POST')]
    for (let i = 0; i < 3; i++) operated.push((await ask()).slice(0, 3))
    operated.push((await ask('/admin/203.0.113.7/block', 'POST')).slice(0, 3), await ask())
    if (
      operated.slice(0, 5).join() !== '200 raised,200,200,429,200' ||
      !/^429 .*Blocked by an operator/.test(operated[5] ?? '')
    )
      throw new Error(`after the override and the block: ${JSON.stringify(operated)}`)
  } finally {
    await mf.dispose()
  }
}

/**
 * Core alone, as users load it, and one copy of core's code whatever the entry: core keeps module state and
 * `RateLimitError` is checked with `instanceof`, so an error made through a kit entry must be the root's, and the
 * MemoryStore a middleware makes by default must be the root's class.
 */
function coreRun(moduleSystem: 'esm' | 'cjs'): string {
  const load = (entry: string) =>
    moduleSystem === 'esm' ? `await import('${entry}')` : `require('${entry}')`
  return `async function main() {
  const { MemoryStore, RateLimitError, RateLimiter, fixedWindow } = ${load('@ratewindow/core')}
  const { HttpRateLimiter, rateLimiterOptionsFrom } = ${load('@ratewindow/core/adapter')}
  const { invalid } = ${load('@ratewindow/core/support')}
  const { remoteShardOf } = ${load('@ratewindow/core/remote')}
  const { storedHash } = ${load('@ratewindow/core/stored')}
  const limiter = new RateLimiter({ rules: fixedWindow({ limit: 2, window: '1m' }) })
  const allowed = []
  for (let i = 0; i < 3; i++) allowed.push((await limiter.limit('k')).allowed)
  if (allowed.join() !== 'true,true,false') throw new Error('allowed ' + allowed.join())
  if (!(invalid('ERR_RATEWINDOW_INVALID_OPTION', 'x', 1, 'text') instanceof RateLimitError))
    throw new Error('an error of @ratewindow/core/support is not the root RateLimitError')
  const binding = { name: 'check', clientIp: () => '203.0.113.9', untrustedForwardedFor: () => undefined, trustProxyHint: '' }
  let thrown
  try { new HttpRateLimiter({ limit: -1 }, binding) } catch (error) { thrown = error }
  if (!(thrown instanceof RateLimitError)) throw new Error('an error of @ratewindow/core/adapter is not the root RateLimitError: ' + thrown)
  if (!(rateLimiterOptionsFrom({ limit: 2, window: '1m' }).store instanceof MemoryStore))
    throw new Error("a middleware's default store is not the root MemoryStore")
  if (typeof remoteShardOf !== 'function' || typeof storedHash !== 'function') throw new Error('a kit entry is empty')
  console.log('ok')
}
main().catch((error) => { console.error(error); process.exit(1) })
`
}

/** The test kit as users type it: the clock, the header assertions, the prefix helper and the conformance suite. */
const TESTING_PROGRAM = `import { fixedWindow, MemoryStore, RateLimiter } from '@ratewindow/core'
import {
  describeStoreConformance,
  expectAllowed,
  type RateLimitHeaders,
  readRateLimit,
  TestClock,
  type TestFunctions,
  testPrefix,
} from '@ratewindow/testing'

export const clock = new TestClock()
export const limiter = new RateLimiter({
  rules: fixedWindow({ limit: 2, window: '1m' }),
  store: clock.memoryStore(),
  circuitBreaker: clock.circuitBreaker(),
  prefix: testPrefix('api'),
})
clock.advance('1m')
export const read: RateLimitHeaders = readRateLimit({ 'ratelimit-limit': '2', 'ratelimit-remaining': '1' })
export function check(response: { status: number; headers: Record<string, string> }): number | undefined {
  return expectAllowed(response, { limit: 2 }).remaining
}
export function register(test: TestFunctions): void {
  describeStoreConformance(test, { name: 'MemoryStore', createStore: (c) => new MemoryStore({ clock: c.read }) })
}
`

/**
 * A test file as a team writes one, for vitest (ESM) or jest (CommonJS): one app per test on a module-level store,
 * fake timers with the runner's defaults, limiting switched off, the header assertions, and the conformance suite.
 */
function kitSuite(runner: 'vitest' | 'jest'): string {
  const load = (name: string) => (runner === 'vitest' ? `await import('${name}')` : `require('${name}')`)
  const head =
    runner === 'vitest'
      ? "import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'\nconst timers = vi"
      : 'const timers = jest'
  return `${head}
const expressModule = ${load('express')}
const express = expressModule.default ?? expressModule
const supertest = ${load('supertest')}
const request = supertest.default ?? supertest
const { MemoryStore, rateLimit } = ${load('@ratewindow/express')}
const { describeStoreConformance, expectAllowed, expectLimited, expectNoRateLimit, testPrefix } = ${load('@ratewindow/testing')}

const store = new MemoryStore() // module level: one for the file
function createApp(options = {}) {
  const limiter = rateLimit({ limit: 2, window: '1m', store, ...options })
  const app = express()
  app.use(limiter)
  app.get('/', (_req, res) => { res.send('ok') })
  return { app, limiter }
}
let current
beforeEach(() => {
  store.clear()
  current = createApp()
})
afterEach(() => current.limiter.close())

describe('one app per test', () => {
  for (const name of ['first', 'second', 'third']) {
    it(name + ': its own app and counters', async () => {
      expectAllowed(await request(current.app).get('/'), { remaining: 1 })
      expectAllowed(await request(current.app).get('/'), { remaining: 0 })
      expectLimited(await request(current.app).get('/'))
    })
  }
  it('two apps live at once keep answering', async () => {
    const other = createApp()
    expectAllowed(await request(other.app).get('/'))
    expectAllowed(await request(current.app).get('/'))
  })
})

it('fake timers: requests answer, and the memory store follows the fake clock', async () => {
  timers.useFakeTimers()
  try {
    await request(current.app).get('/')
    await request(current.app).get('/')
    expectLimited(await request(current.app).get('/'))
    timers.advanceTimersByTime(120_000) // two windows: the sliding window counter weighs the previous one
    expectAllowed(await request(current.app).get('/'))
  } finally {
    timers.useRealTimers()
  }
})

it('enabled: false switches limiting off', async () => {
  const off = createApp({ enabled: false })
  for (let i = 0; i < 3; i++) expectNoRateLimit(await request(off.app).get('/'))
})

it('testPrefix names this worker', () => {
  expect(testPrefix('api')).toMatch(/^api:w[0-9]+:/)
})

describeStoreConformance({ describe, it, expect }, {
  name: 'MemoryStore from the tarball',
  createStore: (clock) => new MemoryStore({ clock: clock.read }),
  numRuns: 10,
})
`
}

/** GraphQL Yoga with the Envelop plugin, keyed by a header, with the cost model composed into a cost function. */
const GRAPHQL_YOGA_PROGRAM = `import { createSchema, createYoga } from 'graphql-yoga'
import { estimateCost, type GraphQLOperation, MemoryStore } from '@ratewindow/graphql'
import { type EnvelopRateLimitPlugin, useRateLimit } from '@ratewindow/graphql/envelop'

const schema = createSchema({
  typeDefs: 'type Query { books(first: Int): [Book!]! } type Book { title: String! }',
  resolvers: { Query: { books: (_: unknown, args: { first?: number }) => Array.from({ length: args.first ?? 3 }, () => ({ title: 't' })) } },
})
const cost = (operation: GraphQLOperation): number => 2 * estimateCost(operation, { listSize: 20 }).cost
export const plugin: EnvelopRateLimitPlugin = useRateLimit({
  limit: 1000,
  window: '1m',
  store: new MemoryStore(),
  maxDepth: 8,
  cost,
  actualCost: (result) => (result.errors?.length ? 0 : 1),
  key: (operation) => operation.headers?.get('x-api-key') ?? 'anonymous',
})
export const yoga = createYoga({ schema, plugins: [plugin] })
`

/** The Envelop plugin on Envelop alone (no Yoga), as a server built on Envelop uses it. */
const GRAPHQL_ENVELOP_PROGRAM = `import { envelop, useSchema } from '@envelop/core'
import { buildSchema } from 'graphql'
import { useRateLimit } from '@ratewindow/graphql/envelop'

export const getEnveloped = envelop({
  plugins: [useSchema(buildSchema('type Query { hello: String }')), useRateLimit({ limit: 100, key: () => 'all' })],
})
`

/** Apollo Server 5 with its plugin, keyed by the typed context. */
const GRAPHQL_APOLLO_PROGRAM = `import { ApolloServer } from '@apollo/server'
import { slidingWindowLog } from '@ratewindow/graphql'
import { rateLimitPlugin } from '@ratewindow/graphql/apollo'

interface Context {
  user?: string
}
export const server = new ApolloServer<Context>({
  typeDefs: 'type Query { hello: String! }',
  resolvers: { Query: { hello: () => 'hi' } },
  plugins: [
    rateLimitPlugin<Context>({
      rules: slidingWindowLog({ limit: 500, window: '1m' }),
      key: (operation) => operation.context.user ?? 'anonymous',
    }),
  ],
})
`

/**
 * Runtime check of @ratewindow/graphql: a Yoga or Apollo server on the plugin (limit 10) answers a cheap query
 * (cost 1), a list (1 + 4 × 1 = 5) and the same list again, refused as a GraphQL error RATE_LIMITED with 429.
 */
function graphqlRun(moduleSystem: 'esm' | 'cjs', server: 'yoga' | 'apollo'): string {
  const load = (name: string) => (moduleSystem === 'esm' ? `(await import('${name}'))` : `require('${name}')`)
  const setup = {
    yoga: `const { createServer } = ${load('node:http')}
  const { createSchema, createYoga } = ${load('graphql-yoga')}
  const { useRateLimit } = ${load('@ratewindow/graphql/envelop')}
  const yoga = createYoga({ schema: createSchema({ typeDefs, resolvers }), plugins: [useRateLimit({ limit: 10 })], logging: false })
  const server = createServer(yoga)
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
  const url = 'http://127.0.0.1:' + server.address().port + '/graphql'
  const close = () => new Promise((resolve) => server.close(resolve))`,
    apollo: `const { ApolloServer } = ${load('@apollo/server')}
  const { startStandaloneServer } = ${load('@apollo/server/standalone')}
  const { rateLimitPlugin } = ${load('@ratewindow/graphql/apollo')}
  const apollo = new ApolloServer({ typeDefs, resolvers, plugins: [rateLimitPlugin({ limit: 10 })] })
  const { url } = await startStandaloneServer(apollo, { listen: { port: 0, host: '127.0.0.1' }, context: async ({ req }) => ({ req }) })
  const close = () => apollo.stop()`,
  }[server]
  return `async function main() {
  const typeDefs = 'type Query { hello: String! books(first: Int!): [Book!]! } type Book { title: String! }'
  const resolvers = { Query: { hello: () => 'hi', books: (_, { first }) => Array.from({ length: first }, () => ({ title: 't' })) } }
  ${setup}
  const answers = []
  for (const query of ['{ hello }', '{ books(first: 4) { title } }', '{ books(first: 4) { title } }']) {
    const response = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ query }) })
    const body = await response.json()
    answers.push([response.status, response.headers.get('ratelimit-remaining'), body.errors?.[0]?.extensions?.code].join(' '))
  }
  await close()
  const expected = '200 9 ,200 4 ,429 4 RATE_LIMITED'
  if (answers.join() !== expected) throw new Error('answers ' + answers.join())
  console.log('ok')
}
main().catch((error) => { console.error(error); process.exit(1) })
`
}

/** tRPC v11 on its standalone (Node) and fetch adapters, keyed by the typed context. */
const TRPC_SERVER_PROGRAM = `import { initTRPC } from '@trpc/server'
import { fetchRequestHandler } from '@trpc/server/adapters/fetch'
import { type CreateHTTPContextOptions, createHTTPServer } from '@trpc/server/adapters/standalone'
import { MemoryStore, type RateLimitResult, rateLimit, rateLimitErrorFormatter, slidingWindowLog } from '@ratewindow/trpc'

const createContext = ({ req, res }: CreateHTTPContextOptions) => ({ req, res, user: req.headers['x-user'] })
type Context = Awaited<ReturnType<typeof createContext>>
const t = initTRPC.context<Context>().create({ errorFormatter: rateLimitErrorFormatter })
const limited = t.procedure.use(
  rateLimit<Context>({
    rules: ({ type }) => slidingWindowLog({ limit: type === 'mutation' ? 10 : 100, window: '1m' }),
    store: new MemoryStore(),
    key: ({ ctx }) => String(ctx.user ?? 'anonymous'),
  }),
)
export const router = t.router({
  hello: limited.query(({ ctx }) => {
    const decision: RateLimitResult | undefined = ctx.rateLimit
    return decision?.remaining
  }),
})
export const server = createHTTPServer({ router, createContext })

const f = initTRPC.context<{ req: Request; resHeaders: Headers }>().create()
const edge = f.router({ ping: f.procedure.use(rateLimit({ key: ({ ctx }) => ctx.req.headers.get('x-api-key') ?? '' })).query(() => 'pong') })
export const handler = (req: Request) =>
  fetchRequestHandler({ endpoint: '/api/trpc', req, router: edge, createContext: ({ req, resHeaders }) => ({ req, resHeaders }) })
`

/** The client reading a refusal's retryAfter, typed by the router's error formatter. */
const TRPC_CLIENT_PROGRAM = `import { createTRPCClient, httpBatchLink, isTRPCClientError } from '@trpc/client'
import { initTRPC } from '@trpc/server'
import { rateLimit, rateLimitErrorFormatter } from '@ratewindow/trpc'

const t = initTRPC.create({ errorFormatter: rateLimitErrorFormatter })
const router = t.router({ hello: t.procedure.use(rateLimit({ key: () => 'all' })).query(() => 'hi') })
type AppRouter = typeof router

export async function retryAfter(): Promise<number | undefined> {
  const client = createTRPCClient<AppRouter>({ links: [httpBatchLink({ url: 'http://127.0.0.1:3000' })] })
  try {
    await client.hello.query()
    return undefined
  } catch (error) {
    return isTRPCClientError<AppRouter>(error) ? error.data?.retryAfter : undefined
  }
}
`

/**
 * Runtime check of @ratewindow/trpc: tRPC's standalone server with the middleware (limit 2 per address) asked by
 * @trpc/client over HTTP: two calls pass, the third is refused with TOO_MANY_REQUESTS, 429 and its retryAfter.
 */
function trpcRun(moduleSystem: 'esm' | 'cjs'): string {
  const load = (name: string) => (moduleSystem === 'esm' ? `(await import('${name}'))` : `require('${name}')`)
  return `async function main() {
  const { initTRPC } = ${load('@trpc/server')}
  const { createHTTPServer } = ${load('@trpc/server/adapters/standalone')}
  const { createTRPCClient, httpLink } = ${load('@trpc/client')}
  const { rateLimit, rateLimitErrorFormatter } = ${load('@ratewindow/trpc')}
  const t = initTRPC.context().create({ errorFormatter: rateLimitErrorFormatter })
  const router = t.router({ hello: t.procedure.use(rateLimit({ limit: 2 })).query(({ ctx }) => ctx.rateLimit.remaining) })
  const server = createHTTPServer({ router, createContext: ({ req, res }) => ({ req, res }) })
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
  const statuses = []
  const client = createTRPCClient({ links: [httpLink({ url: 'http://127.0.0.1:' + server.address().port, fetch: async (url, init) => {
    const response = await fetch(url, init)
    statuses.push(response.status + ' ' + response.headers.get('ratelimit-remaining'))
    return response
  } })] })
  const answers = [await client.hello.query(), await client.hello.query()]
  try {
    await client.hello.query()
  } catch (error) {
    answers.push(error.data.code, typeof error.data.retryAfter)
  }
  await new Promise((resolve) => server.close(resolve))
  const expected = '1,0,TOO_MANY_REQUESTS,number 200 1,200 0,429 0'
  if (answers.join() + ' ' + statuses.join() !== expected) throw new Error('answers ' + answers.join() + ' ' + statuses.join())
  console.log('ok')
}
main().catch((error) => { console.error(error); process.exit(1) })
`
}

/**
 * Overrides on Redis as users operate them (project redis-overrides), on a standalone server and on a 3-master
 * Cluster (their addresses in REDIS_PORT and CLUSTER_NODES): one limiter decides, another with its own client
 * (as in another process) raises the key's limit, blocks it and unblocks it, and each change is honoured at the
 * next decision; `list` finds the key.
 */
const REDIS_OVERRIDES_RUN = `import { fixedWindow, RateLimiter, RedisStore } from '@ratewindow/core'
import { Cluster, Redis } from 'ioredis'

async function operate(connect, label) {
  const clients = [connect(), connect()]
  try {
    const prefix = 'packed-' + Math.random().toString(36).slice(2, 8)
    const [api, desk] = clients.map(
      (client) =>
        new RateLimiter({ rules: fixedWindow({ limit: 2, window: '1m' }), store: new RedisStore({ client }), prefix, name: 'api', overrides: true }),
    )
    const key = 'customer:42'
    const seen = []
    for (let i = 0; i < 3; i++) seen.push((await api.limit(key)).allowed)
    await desk.overrides.set(key, { limit: 4 }, { ttl: '1h' })
    const raised = await api.limit(key)
    seen.push(raised.allowed, raised.limit)
    await desk.overrides.block(key, { for: '1h', reason: 'ticket 5521' })
    const blocked = await api.limit(key)
    seen.push(blocked.allowed, blocked.manualBlock?.reason)
    await desk.overrides.unblock(key)
    seen.push((await api.limit(key)).allowed)
    // A page may hold fewer records than asked, or none (a Cluster's masters one after another): to the last page.
    const listed = []
    let cursor
    do {
      const page = await desk.overrides.list(cursor === undefined ? {} : { cursor })
      listed.push(...page.records.map((record) => record.key))
      cursor = page.cursor
    } while (cursor !== undefined)
    seen.push(listed.join())
    if (seen.join() !== 'true,true,false,true,4,false,ticket 5521,true,customer:42')
      throw new Error(label + ': ' + seen.join())
  } finally {
    for (const client of clients) client.disconnect()
  }
}

const nodes = JSON.parse(process.env.CLUSTER_NODES)
await operate(() => new Redis({ port: Number(process.env.REDIS_PORT), host: '127.0.0.1' }), 'standalone')
await operate(() => new Cluster(nodes), 'Cluster')
console.log('ok')
`

/** A standalone redis-server and a 3-master Cluster (test/support's harness), started together. */
function startRedis(): Promise<PromiseSettledResult<RedisServer | RedisClusterProcesses>[]> {
  return Promise.allSettled([RedisServer.start(), RedisClusterProcesses.start(3)])
}

/**
 * Runs REDIS_OVERRIDES_RUN in the project against the servers `startRedis` started (while the project installed),
 * then stops them.
 */
async function runOnRedis(dir: string, started: ReturnType<typeof startRedis>): Promise<void> {
  writeFileSync(join(dir, 'redis-overrides.mjs'), REDIS_OVERRIDES_RUN)
  const servers = await started
  try {
    const [standalone, cluster] = servers.map((server) => {
      if (server.status === 'rejected') throw server.reason
      return server.value
    }) as [RedisServer, RedisClusterProcesses]
    const env = {
      ...process.env,
      REDIS_PORT: String(standalone.port),
      CLUSTER_NODES: JSON.stringify(cluster.startupNodes),
    }
    const { stdout } = await run(process.execPath, ['redis-overrides.mjs'], {
      cwd: dir,
      env,
      timeout: 60_000,
    })
    if (stdout.trim() !== 'ok') throw new Error(`expected "ok", printed ${JSON.stringify(stdout)}`)
  } finally {
    await Promise.all(
      servers.map((server) => (server.status === 'fulfilled' ? server.value.stop() : undefined)),
    )
  }
}

const serverRuns = (framework: Framework) => ({
  [`run-${framework}.mjs`]: serverRun('esm', framework),
  [`run-${framework}.cjs`]: serverRun('cjs', framework),
})

const projects: Project[] = [
  {
    name: 'core-only',
    tarballs: ['core'],
    dependencies: [],
    programs: { 'core.ts': CORE_PROGRAM },
    runs: { 'run-core.mjs': coreRun('esm'), 'run-core.cjs': coreRun('cjs') },
    typescripts: ['5.9', '7'],
    noNodeTypes: true,
  },
  {
    // Overrides set by one limiter and honoured by another's next decision, on real Redis: a standalone server and
    // a Cluster (runOnRedis).
    name: 'redis-overrides',
    tarballs: ['core'],
    dependencies: ['ioredis@5'],
    programs: {},
    runs: {},
    typescripts: [],
  },
  {
    name: 'otel',
    tarballs: ['core', 'otel'],
    dependencies: ['@opentelemetry/api@1', '@opentelemetry/sdk-metrics@3'],
    programs: { 'otel.ts': OTEL_PROGRAM },
    runs: { 'run-otel.mjs': otelRun('esm'), 'run-otel.cjs': otelRun('cjs') },
    typescripts: ['5.9', '7'],
    noNodeTypes: true,
  },
  {
    name: 'prometheus',
    tarballs: ['core', 'prometheus'],
    dependencies: ['prom-client@15', '@types/node@20'],
    programs: { 'prometheus.ts': PROMETHEUS_PROGRAM },
    runs: { 'run-prometheus.mjs': prometheusRun('esm'), 'run-prometheus.cjs': prometheusRun('cjs') },
    typescripts: ['5.9', '7'],
  },
  {
    name: 'cli',
    tarballs: ['core', 'admin', 'cli'],
    dependencies: ['@types/node@20'],
    programs: { 'cli.ts': CLI_PROGRAM },
    runs: { 'run-cli.mjs': cliRun('esm'), 'run-cli.cjs': cliRun('cjs') },
    typescripts: ['5.9', '7'],
  },
  {
    name: 'admin',
    tarballs: ['core', 'admin'],
    dependencies: ['express@5', '@types/express@5', 'fastify@5', 'hono@4', '@types/node@20'],
    programs: { 'admin.ts': ADMIN_PROGRAM },
    runs: { 'run-admin.mjs': adminRun('esm'), 'run-admin.cjs': adminRun('cjs') },
    typescripts: ['5.9', '7'],
  },
  {
    name: 'admin-koa',
    tarballs: ['core', 'admin'],
    dependencies: ['koa@3', '@types/koa@3', '@types/node@20'],
    programs: { 'admin-koa.ts': ADMIN_KOA_PROGRAM },
    runs: {},
    typescripts: ['5.9', '7'],
  },
  {
    name: 'express-4',
    tarballs: ['core', 'express'],
    dependencies: ['express@4', '@types/express@4'],
    programs: { 'express.ts': EXPRESS_PROGRAM },
    runs: serverRuns('express'),
    typescripts: ['5.9', '7'],
  },
  {
    name: 'express-5',
    tarballs: ['core', 'express'],
    dependencies: ['express@5', '@types/express@5'],
    programs: { 'express.ts': EXPRESS_PROGRAM },
    runs: serverRuns('express'),
    typescripts: ['5.9', '7'],
  },
  {
    name: 'koa-2',
    tarballs: ['core', 'koa'],
    dependencies: ['koa@2', '@types/koa@2'],
    programs: { 'koa.ts': KOA_PROGRAM },
    runs: serverRuns('koa'),
    typescripts: ['5.9', '7'],
  },
  {
    name: 'koa-3',
    tarballs: ['core', 'koa'],
    dependencies: ['koa@3', '@types/koa@3'],
    programs: { 'koa.ts': KOA_PROGRAM },
    runs: serverRuns('koa'),
    typescripts: ['5.9', '7'],
  },
  {
    name: 'hono-4',
    tarballs: ['core', 'hono'],
    dependencies: ['hono@4', '@hono/node-server@2', '@types/node@20'],
    programs: { 'hono.ts': HONO_PROGRAM },
    runs: serverRuns('hono'),
    typescripts: ['5.9', '7'],
  },
  {
    // A Workers project: Hono and the Durable Object store, typed by @cloudflare/workers-types alone.
    name: 'cloudflare-workers',
    tarballs: ['core', 'hono', 'cloudflare'],
    dependencies: ['hono@4', '@cloudflare/workers-types@5'],
    programs: { 'worker.ts': CLOUDFLARE_PROGRAM },
    runs: { 'run-cloudflare.mjs': cloudflareRun('esm'), 'run-cloudflare.cjs': cloudflareRun('cjs') },
    typescripts: ['5.9', '7'],
    noNodeTypes: true,
  },
  {
    name: 'fastify-4',
    tarballs: ['core', 'fastify'],
    dependencies: ['fastify@4', '@types/node@20', '@fastify/rate-limit@9'],
    programs: { 'fastify.ts': FASTIFY_PROGRAM, 'fastify-migration.ts': FASTIFY_MIGRATION_PROGRAM },
    runs: serverRuns('fastify'),
    typescripts: ['5.9', '7'],
  },
  {
    name: 'fastify-5',
    tarballs: ['core', 'fastify'],
    dependencies: ['fastify@5', '@types/node@20', '@fastify/rate-limit@10'],
    programs: { 'fastify.ts': FASTIFY_PROGRAM, 'fastify-migration.ts': FASTIFY_MIGRATION_PROGRAM },
    runs: serverRuns('fastify'),
    typescripts: ['5.9', '7'],
  },
  ...(
    [
      ['12', 'express'],
      ['12', 'fastify'],
      ['11', 'express'],
      ['11', 'fastify'],
    ] as const
  ).map(
    ([nest, platform]): Project => ({
      name: `nestjs-${nest}-${platform}`,
      // @ratewindow/ws is an optional peer of @ratewindow/nestjs, for its `websockets` entry alone (Nest 12 here):
      // the Nest 11 projects go without it, and their runs show that the main entry does not need it.
      tarballs: nest === '12' ? ['core', 'ws', 'nestjs'] : ['core', 'nestjs'],
      dependencies: [
        `@nestjs/common@${nest}`,
        `@nestjs/core@${nest}`,
        `@nestjs/platform-${platform}@${nest}`,
        '@nestjs/throttler@6',
        // The gateway entry (Nest 12 only), its optional peer beside the HTTP platform.
        ...(nest === '12' ? ['@nestjs/websockets@12'] : []),
        'reflect-metadata@0.2',
        'rxjs@7',
        '@types/node@20',
        ...(platform === 'express' ? ['@types/express@5'] : []),
      ],
      programs: {
        'nestjs.ts': NEST_PROGRAM,
        'nestjs-throttler.ts': NEST_THROTTLER_PROGRAM,
        ...(nest === '12' ? { 'nestjs-websockets.ts': NEST_WEBSOCKETS_PROGRAM } : {}),
      },
      runs: serverRuns(`nestjs-${platform}`),
      typescripts: ['5.9', '7'],
      decorators: true,
      // Nest 12 ships ESM only. Under moduleResolution node16 TypeScript refuses a require() of ESM (nodenext
      // allows it, as Node 20.19+ does: the .cjs runs below load it), so a CommonJS program cannot compile
      // there, nor, with lib checks on (TypeScript 7), do @nestjs/throttler 6's CommonJS declarations.
      skip:
        nest === '12'
          ? ({ system, resolution, version, program }) =>
              resolution === 'node16' &&
              (system === 'cjs' || (version === '7' && program === 'nestjs-throttler.ts'))
          : undefined,
    }),
  ),
  {
    // GraphQL Yoga on graphql 17, the major a new Yoga project installs (Yoga 5 accepts 15 to 17). TypeScript 5.9
    // only, with skipLibCheck as Yoga projects set it: Yoga 5's own declarations do not compile with lib checks on
    // (URLPattern, AsyncDisposableStack, lru-cache's Map iterators), whatever ours. The Envelop plugin's
    // declarations are checked with lib checks on in the next project, beside Envelop alone.
    name: 'graphql-yoga',
    tarballs: ['core', 'graphql'],
    dependencies: ['graphql-yoga@5', 'graphql@17', '@types/node@20'],
    programs: { 'graphql-yoga.ts': GRAPHQL_YOGA_PROGRAM },
    runs: { 'run-yoga.mjs': graphqlRun('esm', 'yoga'), 'run-yoga.cjs': graphqlRun('cjs', 'yoga') },
    typescripts: ['5.9'],
  },
  {
    // Apollo Server 5 on graphql 16, the only major it accepts; and Envelop alone, on the same install.
    name: 'graphql-apollo-envelop',
    tarballs: ['core', 'graphql'],
    dependencies: ['@apollo/server@5', '@envelop/core@5', 'graphql@16', '@types/node@20'],
    programs: { 'graphql-apollo.ts': GRAPHQL_APOLLO_PROGRAM, 'graphql-envelop.ts': GRAPHQL_ENVELOP_PROGRAM },
    runs: { 'run-apollo.mjs': graphqlRun('esm', 'apollo'), 'run-apollo.cjs': graphqlRun('cjs', 'apollo') },
    typescripts: ['5.9', '7'],
  },
  {
    // tRPC v11: the server's standalone and fetch adapters, and its client. The client program with TypeScript 5.9
    // only (skipLibCheck): @trpc/client's own declarations name the DOM's `RequestInfo`, which a Node project's
    // lib has not, whatever ours; the server program is checked with lib checks on.
    name: 'trpc',
    tarballs: ['core', 'trpc'],
    dependencies: ['@trpc/server@11', '@trpc/client@11', '@types/node@20'],
    programs: { 'trpc-server.ts': TRPC_SERVER_PROGRAM, 'trpc-client.ts': TRPC_CLIENT_PROGRAM },
    runs: { 'run-trpc.mjs': trpcRun('esm'), 'run-trpc.cjs': trpcRun('cjs') },
    typescripts: ['5.9', '7'],
    skip: ({ version, program }) => version === '7' && program === 'trpc-client.ts',
  },
  {
    // ws, @fastify/websocket, and Hono with @hono/node-ws, beside each other.
    name: 'ws',
    tarballs: ['core', 'ws'],
    dependencies: [
      'ws@8',
      '@types/ws@8',
      'fastify@5',
      '@fastify/websocket@11',
      'hono@4',
      '@hono/node-server@1',
      '@hono/node-ws@1',
      '@types/node@20',
    ],
    programs: { 'ws.ts': WS_PROGRAM, 'ws-hono.ts': WS_HONO_PROGRAM },
    runs: { 'run-ws.mjs': wsRun('esm'), 'run-ws.cjs': wsRun('cjs') },
    typescripts: ['5.9', '7'],
    // Hono's own declarations of its WebSocket helper (hono/ws) name DOM types (a generic MessageEvent, CloseEvent)
    // that lib ES2023 with @types/node lacks: with lib checks on (TypeScript 7), they fail in any such project.
    skip: ({ version, program }) => version === '7' && program === 'ws-hono.ts',
  },
  ...(['15', '16'] as const).map(
    (major): Project => ({
      // Next ships CommonJS (no `exports` map: ESM imports name `next/server.js`, as the package does).
      name: `next-${major}`,
      tarballs: ['core', 'next'],
      dependencies: [`next@${major}`, 'react@19', 'react-dom@19', '@types/react@19', '@types/node@20'],
      programs: { 'next.ts': NEXT_PROGRAM },
      runs: { 'run-next.mjs': nextRun('esm'), 'run-next.cjs': nextRun('cjs') },
      typescripts: ['5.9', '7'],
      skipLibCheck: true,
    }),
  ),
  {
    // Socket.IO alone: the entry needs neither ws's types nor Hono.
    name: 'socket-io',
    tarballs: ['core', 'ws'],
    dependencies: ['socket.io@4', 'socket.io-client@4', '@types/node@20'],
    programs: { 'socket-io.ts': SOCKET_IO_PROGRAM },
    runs: { 'run-socket-io.mjs': socketIoRun('esm'), 'run-socket-io.cjs': socketIoRun('cjs') },
    typescripts: ['5.9', '7'],
  },
  {
    name: 'testing',
    tarballs: ['core', 'express', 'testing'],
    dependencies: ['express@5', '@types/express@5', 'supertest@7', 'vitest@3', 'jest@30', '@types/node@20'],
    programs: { 'testing.ts': TESTING_PROGRAM },
    runs: {},
    typescripts: ['5.9', '7'],
    // Two test files each, so that both runners spread them over workers.
    suites: [
      {
        name: 'vitest (ESM, two files in parallel workers)',
        files: {
          'vitest.config.mjs':
            "export default { test: { include: ['*.vitest.mjs'], testTimeout: 120000 } }\n",
          'a.vitest.mjs': kitSuite('vitest'),
          'b.vitest.mjs': kitSuite('vitest'),
        },
        command: ['node_modules/vitest/vitest.mjs', 'run'],
      },
      {
        name: 'jest (CommonJS, two files in parallel workers)',
        files: {
          'jest.config.cjs':
            "module.exports = { testEnvironment: 'node', testMatch: ['**/*.jest.cjs'], moduleFileExtensions: ['js', 'cjs', 'json'] }\n",
          'a.jest.cjs': kitSuite('jest'),
          'b.jest.cjs': kitSuite('jest'),
        },
        command: ['node_modules/jest/bin/jest.js', '--ci', '--maxWorkers=2'],
      },
    ],
  },
]

/** moduleResolution modes checked per module system (bundler resolution implies an ESM-style program). */
const MODES = {
  esm: { node16: 'node16', nodenext: 'nodenext', bundler: 'esnext' },
  cjs: { node16: 'node16', nodenext: 'nodenext' },
} as const

/**
 * Checks that fail today for a known reason, with the issue that fixes them: reported, not counted as failures
 * while they fail; a known failure that passes fails the run, so that its entry is deleted.
 */
const KNOWN_FAILURES = new Map<string, string>()

/** What a step does, for the `--timings` table. */
type Kind =
  | 'metadata'
  | 'pack'
  | 'built-in scan'
  | 'npm install'
  | 'tsc 5.9'
  | 'tsc 7'
  | 'program run'
  | 'test suite'
  | 'workerd bundle+run'
  | 'redis run'
  | 'no @types/node'
  | 'remove'

interface Outcome {
  name: string
  ok: boolean
  detail?: string
}
const outcomes: Outcome[] = []

/** Timed work for `--timings`: each step, and each batched typecheck as a whole. */
interface Span {
  kind: Kind
  name: string
  /** Start and end, in ms (performance.now()). */
  start: number
  end: number
}
const spans: Span[] = []

async function timed<T>(kind: Kind, name: string, action: () => Promise<T>): Promise<T> {
  const start = performance.now()
  try {
    return await action()
  } finally {
    spans.push({ kind, name, start, end: performance.now() })
  }
}

/** What a failed action printed, or its message. */
function detailOf(error: unknown): string {
  const e = error as { stdout?: string; stderr?: string; message?: string }
  return [e?.stdout, e?.stderr].filter(Boolean).join('\n').trim() || e?.message || String(error)
}

/** Records one check's outcome (`failure`: what it printed; none when it passed), KNOWN_FAILURES applied. */
function report(name: string, failure?: string): void {
  const known = KNOWN_FAILURES.get(name)
  if (failure === undefined && known) {
    outcomes.push({ name, ok: false, detail: 'passes now: delete it from KNOWN_FAILURES' })
    console.log(`  ✗ ${name}: a known failure (${known}) passes now: delete it from KNOWN_FAILURES`)
  } else if (failure === undefined) {
    outcomes.push({ name, ok: true })
    console.log(`  ✓ ${name}`)
  } else if (known) {
    outcomes.push({ name, ok: true })
    console.log(`  ✓ ${name} fails as known: ${known}`)
  } else {
    outcomes.push({ name, ok: false, detail: failure })
    console.log(`  ✗ ${name}\n${failure.replace(/^/gm, '      ')}`)
  }
}

/** Runs one check and reports it; true when its action succeeded (before KNOWN_FAILURES). */
async function step(kind: Kind, name: string, action: () => Promise<unknown>): Promise<boolean> {
  let failure: string | undefined
  try {
    await timed(kind, name, action)
  } catch (error) {
    failure = detailOf(error) || 'failed'
  }
  report(name, failure)
  return failure === undefined
}

/** One typecheck: a tsconfig in a project's `esm` or `cjs` sub-project, its own program and options. */
interface Typecheck {
  name: string
  system: 'esm' | 'cjs'
  config: string
}

/**
 * Typechecks a project's configs with one compiler in one `tsc -b --force` (build mode parses the files the
 * configs share once, and starts the compiler once): each config is still its own program with its own options,
 * and the run fails if any has an error, as `tsc -p` of each would. When it fails, each config runs alone with
 * `tsc -p`, so that every failure is reported under its own check's name.
 */
async function typecheck(version: Version, tsc: string, dir: string, checks: Typecheck[]): Promise<void> {
  if (checks.length === 0) return
  const kind = `tsc ${version}` as const
  const batch = `${kind} -b ${basename(dir)} (${checks.length} configs)`
  // TypeScript 7 checks with several threads by default; here, where one check per core runs already, one thread
  // each gives the same diagnostics for about a third less CPU.
  const flags = version === '7' ? ['--singleThreaded'] : []
  let failure: string | undefined
  try {
    await timed(kind, batch, () =>
      run(
        process.execPath,
        [tsc, '-b', '--force', ...flags, ...checks.map((c) => `${c.system}/${c.config}`)],
        {
          cwd: dir,
          maxBuffer: 16 * 1024 * 1024,
        },
      ),
    )
  } catch (error) {
    failure = detailOf(error) || 'failed'
  }
  if (failure === undefined) {
    for (const check of checks) report(check.name)
    return
  }
  let passedAlone = 0
  for (const check of checks)
    if (
      await step(kind, check.name, () =>
        run(process.execPath, [tsc, '-p', check.config, ...flags], {
          cwd: join(dir, check.system),
          maxBuffer: 16 * 1024 * 1024,
        }),
      )
    )
      passedAlone++
  if (passedAlone === checks.length) report(`${batch}: each config passes alone, the batch failed`, failure)
}

/** Runs at most `size` tasks at once; the others wait in order. */
function limiter(size: number): <T>(task: () => Promise<T>) => Promise<T> {
  let active = 0
  const waiting: (() => void)[] = []
  return async (task) => {
    if (active < size) active++
    else await new Promise<void>((resolve) => waiting.push(resolve)) // the slot is handed over
    try {
      return await task()
    } finally {
      const next = waiting.shift()
      if (next) next()
      else active--
    }
  }
}

/**
 * `--timings`: per kind of work, how many ran, their summed and longest seconds, and the wall-clock span from the
 * first start to the last end (work runs concurrently, so kinds overlap), then the slowest.
 */
function printTimings(total: number): void {
  const s = (ms: number) => (ms / 1000).toFixed(1)
  const kinds = [...new Set(spans.map((span) => span.kind))]
  const rows = kinds.map((kind) => {
    const of = spans.filter((span) => span.kind === kind)
    const durations = of.map((span) => span.end - span.start)
    const wall = Math.max(...of.map((span) => span.end)) - Math.min(...of.map((span) => span.start))
    return [
      kind,
      String(of.length),
      s(durations.reduce((a, b) => a + b, 0)),
      s(Math.max(...durations)),
      s(wall),
    ]
  })
  const table = [['kind', 'runs', 'sum s', 'max s', 'wall s'], ...rows]
  const widths = table[0]!.map((_, column) => Math.max(...table.map((row) => row[column]!.length)))
  console.log('\ntimings (wall s: first start to last end of that kind; kinds overlap)')
  for (const row of table)
    console.log(`  ${row.map((cell, column) => cell.padEnd(widths[column]!)).join('  ')}`)
  console.log(`  total ${s(total)} s; slowest:`)
  for (const span of [...spans].sort((a, b) => b.end - b.start - (a.end - a.start)).slice(0, 15))
    console.log(`  ${s(span.end - span.start).padStart(6)}  ${span.name}`)
}

async function npmInstall(dir: string, specs: string[]): Promise<void> {
  await run(
    'npm',
    [
      'install',
      '--prefer-offline',
      '--no-audit',
      '--no-fund',
      '--loglevel=error',
      '--no-package-lock',
      ...specs,
    ],
    { cwd: dir, maxBuffer: 16 * 1024 * 1024 },
  )
}

function checkMetadata(): void {
  for (const name of packages) {
    const manifest = JSON.parse(readFileSync(join(root, 'packages', name, 'package.json'), 'utf8'))
    const missing = REQUIRED_FIELDS.filter((field) => manifest[field] === undefined)
    if (missing.length > 0) throw new Error(`packages/${name}/package.json lacks ${missing.join(', ')}`)
    if (manifest.repository?.directory !== `packages/${name}`)
      throw new Error(`packages/${name}/package.json: repository.directory must be "packages/${name}"`)
  }
}

type Version = '5.9' | '7'

/**
 * Writes a project's programs, tsconfigs and run files into `dir`; returns its typechecks per TypeScript version
 * and its other checks.
 */
function prepare(
  project: Project,
  dir: string,
): { typechecks: Record<Version, Typecheck[]>; checks: (() => Promise<unknown>)[] } {
  const typechecks: Record<Version, Typecheck[]> = { '5.9': [], '7': [] }
  const checks: (() => Promise<unknown>)[] = []
  for (const system of ['esm', 'cjs'] as const) {
    const sub = join(dir, system)
    mkdirSync(sub)
    writeFileSync(
      join(sub, 'package.json'),
      system === 'esm' ? '{ "type": "module" }\n' : '{ "type": "commonjs" }\n',
    )
    for (const [file, source] of Object.entries(project.programs)) writeFileSync(join(sub, file), source)
    for (const [resolution, module] of Object.entries(MODES[system]))
      for (const program of Object.keys(project.programs))
        for (const version of project.typescripts) {
          // With skipLibCheck, nodenext adds nothing to node16 here; TypeScript 7 checks both in full.
          if (version === '5.9' && resolution === 'nodenext' && !project.noNodeTypes) continue
          if (project.skip?.({ system, resolution, version, program })) continue
          // One config per check, complete in itself (`tsc -p` it to see one check alone, with KEEP=1).
          const config = `tsconfig.${resolution}.${program.replace(/\.ts$/, '')}.typescript-${version}.json`
          const compilerOptions = {
            target: 'ES2022',
            lib: ['ES2023'],
            module,
            moduleResolution: resolution,
            strict: true,
            noEmit: true,
            skipLibCheck: (version === '5.9' && !project.noNodeTypes) || project.skipLibCheck === true,
            esModuleInterop: true,
            types: project.noNodeTypes ? [] : ['node'],
            ...(project.decorators ? { experimentalDecorators: true, emitDecoratorMetadata: true } : {}),
          }
          writeFileSync(
            join(sub, config),
            `${JSON.stringify({ compilerOptions, files: [program] }, null, 2)}\n`,
          )
          typechecks[version].push({
            name: `typecheck ${project.name} ${system} ${resolution} TypeScript ${version}: ${program}`,
            system,
            config,
          })
        }
  }
  for (const [file, source] of Object.entries(project.runs)) {
    writeFileSync(join(dir, file), source)
    checks.push(() =>
      step('program run', `run ${project.name} ${file}`, async () => {
        const { stdout } = await run(process.execPath, [file], { cwd: dir, timeout: 30_000 })
        if (stdout.trim() !== 'ok') throw new Error(`expected "ok", printed ${JSON.stringify(stdout)}`)
      }),
    )
  }
  for (const suite of project.suites ?? []) {
    for (const [file, source] of Object.entries(suite.files)) writeFileSync(join(dir, file), source)
    checks.push(() =>
      step('test suite', `test ${project.name} with ${suite.name}`, () =>
        run(process.execPath, suite.command, { cwd: dir, timeout: 300_000, maxBuffer: 16 * 1024 * 1024 }),
      ),
    )
  }
  if (project.name === 'cloudflare-workers') {
    checks.push(() =>
      step(
        'workerd bundle+run',
        'cloudflare-workers: a Worker bundled from the tarballs answers 200, 200, 429 in workerd (no nodejs_compat), then honours an override and a block set from its admin routes at the next request',
        () => runInWorkerd(dir),
      ),
    )
  }
  if (project.name === 'redis-overrides') {
    // Started now, so that the Cluster forms while the project installs.
    const started = startRedis()
    checks.push(() =>
      step(
        'redis run',
        'redis-overrides: the packed core on a standalone redis-server and a 3-master Cluster honours an override, a block and an unblock set by another limiter at the next decision',
        () => runOnRedis(dir, started),
      ),
    )
  }
  if (project.noNodeTypes) {
    checks.push(() =>
      step('no @types/node', `${project.name} installs no @types/node`, async () => {
        const types = join(dir, 'node_modules', '@types')
        let entries: string[] = []
        try {
          entries = readdirSync(types)
        } catch {}
        if (entries.length > 0) throw new Error(`node_modules/@types holds ${entries.join(', ')}`)
      }),
    )
  }
  return { typechecks, checks }
}

async function main(): Promise<void> {
  const started = performance.now()
  console.log(`Packed tarballs, checked as users install them (in ${work})`)
  await step('metadata', 'package.json metadata (repository, homepage, bugs, keywords, license)', async () =>
    checkMetadata(),
  )

  const tarballDir = join(work, 'tarballs')
  mkdirSync(tarballDir)
  // One pnpm packs them all (the same tarballs, byte for byte, as a `pnpm pack` in each package).
  await step('pack', 'pnpm pack every package', () =>
    run('pnpm', ['-r', '--filter', './packages/*', 'pack', '--pack-destination', tarballDir], { cwd: root }),
  )
  const tarballs = Object.fromEntries(
    packages.map((name) => {
      const file = readdirSync(tarballDir).find((entry) => entry.startsWith(`ratewindow-${name}-`))
      if (!file) throw new Error(`pnpm pack produced no tarball for @ratewindow/${name}`)
      return [name, join(tarballDir, file)]
    }),
  ) as Record<Package, string>
  const packed = performance.now()

  // Core, the Hono adapter and the Durable Object store load on Workers without nodejs_compat: their packed
  // builds import no Node module and use no unguarded Node global (scripts/web-standard.ts).
  for (const name of ['core', 'hono', 'cloudflare'] as const) {
    await step(
      'built-in scan',
      `@ratewindow/${name} tarball: no Node built-in import, no unguarded Node global`,
      async () => {
        const unpacked = join(work, `${name}-unpacked`)
        mkdirSync(unpacked)
        await run('tar', ['-xzf', tarballs[name], '-C', unpacked])
        const problems: string[] = []
        for (const file of ['index.js', 'index.cjs']) {
          const { uses, gone } = unexcusedUses(
            readFileSync(join(unpacked, 'package', 'dist', file), 'utf8'),
            file,
          )
          if (uses.length > 0) problems.push(describeUses(`dist/${file}`, uses))
          for (const each of gone)
            problems.push(`dist/${file} no longer imports ${each}: delete it from KNOWN_NODE_IMPORTS`)
        }
        if (problems.length > 0) throw new Error(problems.join('\n'))
      },
    )
  }

  // Installs and checks overlap: a project's checks start once its own install (and, for its typechecks, the
  // TypeScript install) is done. At most one install and one check per core run at once.
  const cores = availableParallelism()
  const installSlot = limiter(cores)
  const checkSlot = limiter(cores)

  // TypeScript itself is installed once beside the projects; `typescript7` is the native port (npm `typescript@7`).
  const tools = join(work, 'tools')
  mkdirSync(tools)
  writeFileSync(join(tools, 'package.json'), '{ "private": true }\n')
  const toolsInstalled = installSlot(() =>
    step('npm install', 'install TypeScript 5.9 and 7', () =>
      npmInstall(tools, ['typescript@5.9', 'typescript7@npm:typescript@7']),
    ),
  )
  const tsc: Record<Version, string> = {
    '5.9': join(tools, 'node_modules', 'typescript', 'bin', 'tsc'),
    '7': join(tools, 'node_modules', 'typescript7', 'bin', 'tsc'),
  }

  // The longest installs first (more packages asked for, roughly more to install), so that the last install to
  // end, and the checks waiting on it, are short ones.
  const specs = (project: Project) => project.tarballs.length + project.dependencies.length
  const only = process.env.ONLY?.split(',')
  const chosen = only === undefined ? projects : projects.filter((project) => only.includes(project.name))
  const byInstall = [...chosen].sort((a, b) => specs(b) - specs(a))
  await Promise.all(
    byInstall.map(async (project) => {
      const dir = join(work, project.name)
      mkdirSync(dir)
      writeFileSync(join(dir, 'package.json'), `{ "name": "check-${project.name}", "private": true }\n`)
      const { typechecks, checks } = prepare(project, dir)
      await installSlot(() =>
        step(
          'npm install',
          `install ${project.name}: ${[...project.tarballs.map((t) => `@ratewindow/${t}.tgz`), ...project.dependencies].join(' ')}`,
          () => npmInstall(dir, [...project.tarballs.map((name) => tarballs[name]), ...project.dependencies]),
        ),
      )
      await Promise.all([
        ...(['5.9', '7'] as const).map(async (version) => {
          await toolsInstalled
          await checkSlot(() => typecheck(version, tsc[version], dir, typechecks[version]))
        }),
        ...checks.map((check) => checkSlot(check)),
      ])
      // Thousands of files: removed while other projects are still checked, not all at the end.
      if (!keep)
        await timed('remove', `remove ${project.name}`, () => rm(dir, { recursive: true, force: true }))
    }),
  )
  if (!keep)
    await timed('remove', 'remove the tools and tarballs', () => rm(work, { recursive: true, force: true }))
  const done = performance.now()

  const failed = outcomes.filter((outcome) => !outcome.ok)
  const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`
  console.log(
    `\npack ${seconds(packed - started)}, installs and checks ${seconds(done - packed)}, total ${seconds(done - started)}`,
  )
  if (process.argv.includes('--timings')) printTimings(done - started)
  console.log(`package checks: ${outcomes.length - failed.length} passed, ${failed.length} failed`)
  if (keep) console.log(`kept ${work}`)
  if (failed.length > 0) {
    console.log(`failed:\n${failed.map((outcome) => `  ${outcome.name}`).join('\n')}`)
    process.exitCode = 1
  }
}

await main()
