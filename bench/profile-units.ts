/**
 * The attribution of bench/profile.ts (issue 33): which of our units a profiled function belongs to, and a
 * profile's self time summed by unit, file and function over a window of its samples.
 *
 * @ratewindow/core's dist is bundled (its entries and the chunks they share), so a profile names a dist file for
 * every function of the core; each file's source map (built beside it) maps each function's start back to its source file under packages/core/src, and
 * `UNITS` maps source files to units. An adapter's dist is the adapter; a package under node_modules is the
 * framework, the Redis client or a peer; bench/ is the server's own route and the floors' hooks.
 */
import { readFileSync } from 'node:fs'
import { SourceMap } from 'node:module'
import { fileURLToPath } from 'node:url'

/** The units, in the order the tables list them. */
export const UNIT_ORDER = [
  'adapter',
  'address',
  'key',
  'engine',
  'limiter',
  'store',
  'headers',
  'grouping',
  'client',
  'support',
  'framework',
  'peer',
  'bench',
  'gc',
  'node/other',
] as const
export type Unit = (typeof UNIT_ORDER)[number]

/**
 * @ratewindow/core's source files (under packages/core/src) by unit: the first prefix that matches. The one place
 * that says which file is which unit (test/bench-profile.test.ts checks that every source file has an entry).
 */
export const UNITS: readonly [prefix: string, unit: Unit][] = [
  ['http/ip.ts', 'address'],
  ['http/proxy-warnings.ts', 'address'],
  ['http/address-options.ts', 'address'],
  ['http/keys.ts', 'key'],
  ['limiter/namespaces.ts', 'key'],
  ['support/hash.ts', 'key'],
  ['http/headers.ts', 'headers'],
  ['http/header-mix.ts', 'headers'],
  ['http/', 'engine'],
  ['slow-down/', 'engine'],
  ['limiter/', 'limiter'],
  ['operator/', 'limiter'],
  ['gateway/', 'limiter'],
  ['observe.ts', 'limiter'],
  ['result.ts', 'limiter'],
  ['stores/redis/groups.ts', 'grouping'],
  ['stores/redis/send-group.ts', 'grouping'],
  ['stores/redis/batch-script.ts', 'grouping'],
  ['stores/redis/flight-clock.ts', 'grouping'],
  ['stores/redis/clients/', 'client'],
  ['stores/', 'store'],
  ['algorithms/', 'store'],
  ['support/', 'support'],
  ['time/', 'support'],
  ['entries/', 'support'],
]

/** Packages under node_modules that are a Redis client (or its parts), and the peers' libraries. */
const CLIENT_PACKAGES =
  /^(ioredis|ioredis6|iovalkey|redis|redis5|@redis\/.*|@valkey\/.*|denque|redis-parser|redis-errors|cluster-key-slot|standard-as-callback|lodash\..*)$/
const PEER_PACKAGES =
  /^(rate-limiter-flexible|express-rate-limit|rate-limit-redis|@fastify\/rate-limit|koa-ratelimit|hono-rate-limiter|@nestjs\/throttler)$/
/** Packages of the server's tooling, not of the request path (tsx's loader): Node's side. */
const TOOL_PACKAGES = /^(tsx|esbuild|get-tsconfig|resolve-pkg-maps)$/

/** A core source path (relative to packages/core/src) → its unit. */
export function unitOfSource(path: string): Unit | undefined {
  for (const [prefix, unit] of UNITS) if (path.startsWith(prefix)) return unit
  return undefined
}

interface CallFrame {
  functionName: string
  url: string
  lineNumber: number
  columnNumber: number
}
interface ProfileNode {
  id: number
  callFrame: CallFrame
}
export interface CpuProfile {
  nodes: ProfileNode[]
  startTime: number
  endTime: number
  samples: number[]
  timeDeltas: number[]
}

/** Where a function is: its unit and, for our packages, its source file. */
export interface Place {
  unit: Unit
  file: string
}

const maps = new Map<string, SourceMap | undefined>()
function sourceMapOf(path: string): SourceMap | undefined {
  if (!maps.has(path)) {
    let map: SourceMap | undefined
    try {
      map = new SourceMap(JSON.parse(readFileSync(`${path}.map`, 'utf8')))
    } catch {
      map = undefined
    }
    maps.set(path, map)
  }
  return maps.get(path)
}

/** The unit of one profile node's function. */
export function placeOf(frame: CallFrame): Place {
  const { functionName, url } = frame
  if (functionName === '(garbage collector)') return { unit: 'gc', file: '' }
  if (url === '' || url.startsWith('node:')) return { unit: 'node/other', file: url || functionName }
  const path = url.startsWith('file:') ? fileURLToPath(url) : url
  const ours = /\/packages\/([^/]+)\/(dist|src)\/(.*)$/.exec(path)
  if (ours) {
    const [, name, folder, rest] = ours as unknown as [string, string, string, string]
    if (name !== 'core') return { unit: 'adapter', file: `${name}/${folder}/${rest}` }
    let source = folder === 'src' ? rest : undefined
    if (source === undefined) {
      const entry = sourceMapOf(path)?.findEntry(frame.lineNumber, frame.columnNumber) as
        | { originalSource?: string }
        | undefined
      source = /src\/(.*)$/.exec(entry?.originalSource ?? '')?.[1]
    }
    // index.ts (the export list) runs nothing per request; a position the map does not resolve is Node's side.
    const unit = source === undefined ? undefined : unitOfSource(source)
    return unit === undefined
      ? { unit: 'node/other', file: `core/${folder}/${source ?? rest}` }
      : { unit, file: `core/src/${source}` }
  }
  const modules = path.lastIndexOf('/node_modules/')
  if (modules >= 0) {
    const parts = path.slice(modules + '/node_modules/'.length).split('/')
    const name = parts[0]!.startsWith('@') ? `${parts[0]}/${parts[1]}` : parts[0]!
    const unit = CLIENT_PACKAGES.test(name)
      ? 'client'
      : PEER_PACKAGES.test(name)
        ? 'peer'
        : TOOL_PACKAGES.test(name)
          ? 'node/other'
          : 'framework'
    return { unit, file: name }
  }
  if (/\/bench\/[^/]+$/.test(path))
    return { unit: 'bench', file: path.slice(path.lastIndexOf('/bench/') + 1) }
  return { unit: 'node/other', file: path }
}

/** One variant's profile, summed by unit and by function over the samples between `from` and `to` (µs). */
export interface Summary {
  /** Sampled µs, idle left out. */
  busyUs: number
  units: Record<Unit, number>
  files: Map<string, { unit: Unit; us: number }>
  functions: Map<string, { unit: Unit; us: number }>
}

export function summarise(profile: CpuProfile, from = -Infinity, to = Infinity): Summary {
  const byId = new Map(profile.nodes.map((node) => [node.id, node]))
  const places = new Map<number, Place | undefined>()
  const units = Object.fromEntries(UNIT_ORDER.map((unit) => [unit, 0])) as Record<Unit, number>
  const files = new Map<string, { unit: Unit; us: number }>()
  const functions = new Map<string, { unit: Unit; us: number }>()
  let busyUs = 0
  let at = profile.startTime
  const { samples, timeDeltas } = profile
  for (let i = 0; i < samples.length; i++) {
    at += timeDeltas[i]!
    // A sample stands for the time until the next one.
    const us = i + 1 < samples.length ? timeDeltas[i + 1]! : 0
    if (at < from || at > to || us <= 0) continue
    const id = samples[i]!
    if (!places.has(id)) {
      const frame = byId.get(id)!.callFrame
      places.set(id, /^\((idle|root)\)$/.test(frame.functionName) ? undefined : placeOf(frame))
    }
    const place = places.get(id)
    if (place === undefined) continue
    busyUs += us
    units[place.unit] += us
    const file = files.get(place.file) ?? { unit: place.unit, us: 0 }
    file.us += us
    files.set(place.file, file)
    const frame = byId.get(id)!.callFrame
    const name = `${frame.functionName || '(anonymous)'} ${place.file}`
    const fn = functions.get(name) ?? { unit: place.unit, us: 0 }
    fn.us += us
    functions.set(name, fn)
  }
  return { busyUs, units, files, functions }
}
