/**
 * Core loads on Web-standard APIs alone: its build, made afresh here as `pnpm build` makes it, imports
 * no Node built-in module and uses no Node-only global without a `typeof` guard (scripts/web-standard.ts), and its
 * CommonJS build loads and decides in a context that holds only what Cloudflare Workers give without
 * `nodejs_compat` (no `process`, `Buffer`, `setImmediate`, numeric timer ids without `unref`, no timer at load or
 * construction). scripts/check-packages/ runs the same scan on the packed tarball.
 */
import { webcrypto } from 'node:crypto'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import vm from 'node:vm'
import { build } from 'tsup'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { describeUses, KNOWN_NODE_IMPORTS, nodeOnlyUses, unexcusedUses } from '../scripts/web-standard.js'
import { packageBuild } from '../tsup.config.base.js'

const coreDir = resolve(import.meta.dirname, '../packages/core')
let outDir: string
/** Each entry this test loads, as built for each format (no shared chunks: each file stands alone). */
let files: Record<'esm' | 'cjs', Record<'index' | 'adapter', string>>

beforeAll(async () => {
  outDir = mkdtempSync(join(tmpdir(), 'ratewindow-web-'))
  await build({
    ...packageBuild,
    entry: { index: join(coreDir, 'src/index.ts'), adapter: join(coreDir, 'src/entries/adapter.ts') },
    splitting: false,
    tsconfig: join(coreDir, 'tsconfig.json'),
    outDir,
    dts: false,
    sourcemap: false,
    silent: true,
  })
  const read = (name: string) => readFileSync(join(outDir, name), 'utf8')
  files = {
    esm: { index: read('index.js'), adapter: read('adapter.js') },
    cjs: { index: read('index.cjs'), adapter: read('adapter.cjs') },
  }
}, 120_000)

afterAll(() => {
  if (outDir) rmSync(outDir, { recursive: true, force: true })
})

describe("core's build uses Web-standard APIs only", () => {
  it.each(['esm', 'cjs'] as const)(
    'the %s build imports no Node module and uses no unguarded Node global',
    (format) => {
      for (const entry of ['index', 'adapter'] as const) {
        const file = `${entry}.${format === 'esm' ? 'js' : 'cjs'}`
        const { uses, gone } = unexcusedUses(files[format][entry], file)
        expect(describeUses(file, uses)).toBe('')
        if (entry === 'index')
          expect(
            gone,
            'no longer imported: delete from KNOWN_NODE_IMPORTS (scripts/web-standard.ts)',
          ).toEqual([])
      }
    },
  )

  it('the scan finds what Node-only code looks like in a build', () => {
    const sample = [
      'import { createHash } from "crypto"',
      'import net from "node:net"',
      'const b = Buffer.from("x")',
      'process.emitWarning("w")',
      'const later = typeof setImmediate === "function" ? (f) => setImmediate(f) : (f) => setTimeout(f, 0)',
      'const host = globalThis.process',
      'const o = { process: 1, Buffer: 2 }',
      'setImmediate(() => {})',
    ].join('\n')
    expect(nodeOnlyUses(sample, 'sample.js').map((use) => `${use.line} ${use.kind} ${use.name}`)).toEqual([
      '1 import crypto',
      '2 import node:net',
      '3 global Buffer',
      '4 global process',
      '8 global setImmediate',
    ])
  })

  it('the CommonJS build loads and decides with only Web-standard globals, and arms no timer before first use', async () => {
    const warnings: string[] = []
    const armed: string[] = []
    const timers = new Map<number, ReturnType<typeof setTimeout>>()
    let nextId = 1
    // Workers' timers: numeric ids, no `unref`.
    const arm = (kind: 'timeout' | 'interval') => (task: () => void, ms?: number) => {
      const id = nextId++
      armed.push(kind)
      timers.set(id, kind === 'timeout' ? setTimeout(task, ms) : setInterval(task, ms))
      return id
    }
    const disarm = (id: number) => {
      clearTimeout(timers.get(id))
      timers.delete(id)
    }
    const module = { exports: {} as Record<string, unknown> }
    const context = vm.createContext({
      module,
      exports: module.exports,
      require: (name: string) => {
        if (KNOWN_NODE_IMPORTS.has(name.replace(/^node:/, ''))) return createRequire(import.meta.url)(name)
        throw new Error(`require('${name}') on a Web-standard runtime`)
      },
      console: { ...console, warn: (...args: unknown[]) => warnings.push(args.join(' ')) },
      crypto: webcrypto,
      TextEncoder,
      TextDecoder,
      URL,
      AbortController,
      performance,
      structuredClone,
      queueMicrotask,
      setTimeout: arm('timeout'),
      setInterval: arm('interval'),
      clearTimeout: disarm,
      clearInterval: disarm,
    })
    try {
      vm.runInContext(files.cjs.index, context, { filename: 'index.cjs' })
      const core = module.exports as typeof import('@ratewindow/core')
      context.module = { exports: {} }
      context.exports = context.module.exports
      vm.runInContext(files.cjs.adapter, context, { filename: 'adapter.cjs' })
      const adapter = context.module.exports as typeof import('@ratewindow/core/adapter')
      const runner = {
        family: 'test',
        cluster: false,
        evalSha: () => Promise.reject(new Error('no Redis here')),
        eval: () => Promise.reject(new Error('no Redis here')),
        del: () => Promise.resolve(),
      }
      const memory = new core.RateLimiter({ rules: core.fixedWindow({ limit: 2, window: '1m' }) })
      const redis = new core.RateLimiter({
        rules: core.fixedWindow({ limit: 2, window: '1m' }),
        store: new core.RedisStore({ client: runner }),
        onError: () => {},
      })
      const synced = new core.SyncedStore({ client: runner, onError: () => {} })
      const http = new adapter.HttpRateLimiter<{ ip: string; forwarded: boolean }>(
        {
          limit: 1,
          headers: 'draft-8',
          partitionKeySecret: 'a-secret-of-32-characters-length',
          concurrency: { limit: 1 },
        },
        {
          name: 'Test',
          clientIp: (request) => request.ip,
          untrustedForwardedFor: (request) => (request.forwarded ? true : undefined),
          trustProxyHint: 'pass trustProxy',
        },
      )
      expect(armed, 'timers armed at load or construction').toEqual([])

      const allowed = []
      for (let i = 0; i < 3; i++) allowed.push((await memory.limit('k')).allowed)
      expect(allowed).toEqual([true, true, false])
      expect(armed.length).toBeGreaterThan(0) // the memory store's sweep, from its first use

      const failed = await redis.limit('k')
      expect([failed.allowed, failed.source]).toEqual([true, 'policy'])

      await synced.close()

      const decision = await http.decide({ ip: '203.0.113.9', forwarded: true })
      expect(decision?.result.allowed).toBe(true)
      expect(decision?.headers.RateLimit).toContain(
        `pk=:${adapter.partitionKey('203.0.113.9', 'a-secret-of-32-characters-length')}:`,
      )
      expect(adapter.partitionKey('203.0.113.9', 'a-secret-of-32-characters-length')).toBe(
        (await import('@ratewindow/core/adapter')).partitionKey(
          '203.0.113.9',
          'a-secret-of-32-characters-length',
        ),
      )
      expect(warnings.join('\n')).toContain('RATEWINDOW_UNTRUSTED_PROXY')
    } finally {
      for (const id of [...timers.keys()]) disarm(id)
    }
  })
})
