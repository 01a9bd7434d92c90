/**
 * The profile's attribution (bench/profile-units.ts, issue 33): every source file of the core has a unit, bundled
 * functions are found in their source file through the dist's source map, and the summary keeps only the samples
 * of the measured window.
 */
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { describe, expect, it } from 'vitest'
import { type CpuProfile, placeOf, summarise, unitOfSource } from '../bench/profile-units.js'

const core = join(import.meta.dirname, '..', 'packages', 'core')
const sources = (readdirSync(join(core, 'src'), { recursive: true }) as string[])
  .filter((file) => file.endsWith('.ts') && file !== 'index.ts')
  .map((file) => file.split('\\').join('/'))

const frame = (url: string, functionName = 'f', lineNumber = 0, columnNumber = 0) => ({
  functionName,
  url,
  lineNumber,
  columnNumber,
})

describe('bench profile attribution', () => {
  it('places every source file of the core in a unit', () => {
    expect(sources.length).toBeGreaterThan(50)
    expect(sources.filter((file) => unitOfSource(file) === undefined)).toEqual([])
    expect(unitOfSource('http/ip.ts')).toBe('address')
    expect(unitOfSource('stores/redis/send-group.ts')).toBe('grouping')
    expect(unitOfSource('stores/redis/clients/ioredis.ts')).toBe('client')
    expect(unitOfSource('stores/local/memory.ts')).toBe('store')
  })

  it('finds a bundled function in its source file through the source map beside the bundle', () => {
    // A bundle of one function whose map points its first position at http/ip.ts.
    const dir = join(mkdtempSync(join(tmpdir(), 'profile-map-')), 'packages', 'core', 'dist')
    mkdirSync(dir, { recursive: true })
    writeFileSync(join(dir, 'index.js'), 'function parseIp() {}\n')
    writeFileSync(
      join(dir, 'index.js.map'),
      JSON.stringify({ version: 3, sources: ['../src/http/ip.ts'], names: [], mappings: 'AAAA' }),
    )
    expect(placeOf(frame(pathToFileURL(join(dir, 'index.js')).href, 'parseIp'))).toEqual({
      unit: 'address',
      file: 'core/src/http/ip.ts',
    })
  })

  const built = join(core, 'dist')
  it.skipIf(!existsSync(built))('places a function of the built core through its source map', () => {
    // The entries share their code in chunks: the file that holds `parseIp`, whichever it is.
    const found = readdirSync(built)
      .filter((file) => file.endsWith('.js'))
      .map((file) => {
        const path = join(built, file)
        const line = readFileSync(path, 'utf8')
          .split('\n')
          .findIndex((text) => /^function parseIp\(/.test(text))
        return { path, line }
      })
      .find((each) => each.line > 0)
    expect(found).toBeDefined()
    const { path, line } = found!
    expect(placeOf(frame(pathToFileURL(path).href, 'parseIp', line, 0))).toEqual({
      unit: 'address',
      file: 'core/src/http/ip.ts',
    })
  })

  it('names adapters, the Redis client, the framework, peers and Node', () => {
    const root = '/x/packages'
    expect(placeOf(frame(`file://${root}/koa/dist/index.js`)).unit).toBe('adapter')
    expect(
      placeOf(frame('file:///x/node_modules/.pnpm/ioredis@5/node_modules/ioredis/built/Redis.js')).unit,
    ).toBe('client')
    expect(
      placeOf(frame('file:///x/node_modules/.pnpm/koa@3/node_modules/koa/lib/application.js')).unit,
    ).toBe('framework')
    expect(placeOf(frame('file:///x/node_modules/rate-limiter-flexible/lib/x.js')).unit).toBe('peer')
    expect(placeOf(frame('node:_http_outgoing')).unit).toBe('node/other')
    expect(placeOf(frame('', '(garbage collector)')).unit).toBe('gc')
  })

  it('sums self time by unit over the window only, idle left out', () => {
    const profile: CpuProfile = {
      nodes: [
        { id: 1, callFrame: frame('', '(root)') },
        { id: 2, callFrame: frame('', '(idle)') },
        { id: 3, callFrame: frame('node:http') },
        { id: 4, callFrame: frame('file:///x/packages/koa/dist/index.js') },
      ],
      startTime: 1_000,
      endTime: 1_100,
      // Samples at 1010, 1020, …, 1060; each counts until the next.
      samples: [3, 4, 2, 4, 3, 3],
      timeDeltas: [10, 10, 10, 10, 10, 10],
    }
    const all = summarise(profile)
    expect(all.busyUs).toBe(40)
    expect(all.units.adapter).toBe(20)
    expect(all.units['node/other']).toBe(20)
    const window = summarise(profile, 1_015, 1_045)
    expect(window.units.adapter).toBe(20)
    expect(window.busyUs).toBe(20)
  })
})
