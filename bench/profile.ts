/**
 * Where a server's time goes, by our units (issue 33): a framework's bench server (http-server.ts) under
 * `node --cpu-prof`, loaded by autocannon, its self time grouped by unit: adapter, address, key, engine, limiter,
 * store, headers, grouping, client (the Redis client, ours and the library), framework, and Node's own.
 *
 * Attribution (profile-units.ts): the servers run the built packages, as users get them, and the core's bundled
 * functions are placed in their source files through the dist's source map. (The `@ratewindow/source` condition
 * would name the sources directly, but under tsx's transform: not the code that runs in production,
 * docs/profiling.md.)
 *
 * Window: the profile covers the process's life; only the samples taken while the measured load ran are kept
 * (the profile's clock is the monotonic clock of `process.hrtime`), so start-up and the warm-up do not count.
 * `µs/req` is a unit's sampled time ÷ responses in that window; `share` its part of all non-idle samples.
 *
 * Before and after in one command: `--before` adds `<variant>@before` for each variant, run from the checkout in
 * BENCH_BEFORE (http.ts `buildOf`) at the same time as the variant, both pinned to one core as in pairs.ts.
 *
 *   pnpm --filter @ratewindow/bench profile -- --frameworks koa --variants ratewindow,ratewindow-redis --keys 1
 *   BENCH_BEFORE=<built checkout> pnpm --filter @ratewindow/bench profile -- --frameworks hono --before
 *   [--duration 5] [--interval 250 (µs between samples)] [--top 12 (functions listed)] [--json]
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { cpus, tmpdir } from 'node:os'
import { join } from 'node:path'
import { RedisServer } from '../test/support/redis-server.js'
import { load, pinTo, type Server, startServer } from './http.js'
import { type CpuProfile, type Summary, summarise, UNIT_ORDER, type Unit } from './profile-units.js'
import { argument, median, table } from './stats.js'

/** One profiled server of a run: its summary, responses and Node CPU in the measured window. */
export interface ProfiledVariant {
  framework: string
  keys: number
  variant: string
  responses: number
  rps: number
  /** Node CPU per response (process.cpuUsage), µs, profiler included. */
  nodeUs: number
  summary: Summary
}

/**
 * The profile of the server's main thread: `--cpu-prof` writes one per thread (`CPU.<date>.<time>.<pid>.<thread>.
 * <n>.cpuprofile`), and tsx's loader runs on a thread of its own, idle most of the time.
 */
function readProfile(dir: string): CpuProfile {
  const main = readdirSync(dir).find((name) => /^CPU\.\d+\.\d+\.\d+\.0\.\d+\.cpuprofile$/.test(name))
  if (main === undefined)
    throw new Error(`profile: no main-thread profile in ${dir} (did the server exit normally?)`)
  return JSON.parse(readFileSync(join(dir, main), 'utf8')) as CpuProfile
}

const monotonicUs = () => Number(process.hrtime.bigint() / 1000n)

export async function runProfiles(options: {
  frameworks: string[]
  variants: string[]
  keys: number[]
  duration: number
  intervalUs: number
  before: boolean
  /** Servers profiled at once in place of `variants` (and their `@before`): e.g. ours and a peer (`runCeilings`). */
  together?: readonly (readonly string[])[]
}): Promise<ProfiledVariant[]> {
  const pinned = cpus().length >= 2 && pinTo('0', process.pid)
  const redis = await RedisServer.start()
  const redisUrl = `redis://127.0.0.1:${redis.port}`
  const results: ProfiledVariant[] = []
  try {
    for (const framework of options.frameworks)
      for (const keys of options.keys)
        for (const names of options.together ??
          options.variants.map((variant) => (options.before ? [variant, `${variant}@before`] : [variant]))) {
          const dirs = names.map(() => mkdtempSync(join(tmpdir(), 'ratewindow-profile-')))
          const servers: Server[] = []
          try {
            for (const [i, name] of names.entries())
              servers.push(
                await startServer(framework, name, 'allowed', redisUrl, pinned ? '1' : undefined, [
                  '--cpu-prof',
                  `--cpu-prof-dir=${dirs[i]}`,
                  `--cpu-prof-interval=${options.intervalUs}`,
                ]),
              )
            const measure = (seconds: number) =>
              Promise.all(servers.map((server) => load([server], keys, seconds, 25)))
            await measure(1)
            const from = monotonicUs()
            const loads = await measure(options.duration)
            const to = monotonicUs()
            await Promise.all(
              servers.map(
                (server) =>
                  new Promise((resolve) => {
                    server.child.once('exit', resolve)
                    server.child.kill('SIGTERM')
                  }),
              ),
            )
            for (const [i, name] of names.entries()) {
              const profile = readProfile(dirs[i]!)
              if (profile.endTime < to || profile.startTime > from)
                throw new Error(
                  `profile: ${name}'s profile (${profile.startTime}–${profile.endTime} µs) does not cover the load (${from}–${to} µs): not the same clock`,
                )
              results.push({
                framework,
                keys,
                variant: name,
                responses: loads[i]!.responses,
                rps: loads[i]!.rps,
                nodeUs: loads[i]!.nodeUs,
                summary: summarise(profile, from, to),
              })
            }
          } finally {
            for (const server of servers) server.child.kill()
            for (const dir of dirs) rmSync(dir, { recursive: true, force: true })
          }
          console.error(`profile: ${framework} ${keys} key(s) ${names.join(' and ')} done`)
        }
  } finally {
    await redis.stop()
    if (pinned)
      pinTo(
        cpus()
          .map((_, i) => i)
          .join(','),
        process.pid,
      )
  }
  return results
}

/** The units that are not our code: the framework, a peer, the bench's own, the GC and Node's. */
const NOT_OURS = new Set<Unit>(['framework', 'peer', 'bench', 'gc', 'node/other'])

/** Our units: the adapter's and the core's (the Redis client's library is not ours either). */
export const OUR_UNITS: readonly Unit[] = UNIT_ORDER.filter(
  (unit) => unit !== 'client' && !NOT_OURS.has(unit),
)

/** Our units' part of a profiled server's busy samples. */
export function ourShare(summary: Summary): number {
  return OUR_UNITS.reduce((sum, unit) => sum + summary.units[unit], 0) / (summary.busyUs || 1)
}

/** A peer's part of its server's busy samples: its package, and the bench's middleware around it (peers.ts). */
export function peerShare(summary: Summary): number {
  return (summary.units.peer + (summary.files.get('bench/peers.ts')?.us ?? 0)) / (summary.busyUs || 1)
}

/** One pair's ceiling (issue 46): what ours would reach against the peer if our units cost nothing. */
export interface Ceiling {
  framework: string
  keys: number
  ours: string
  peer: string
  /** Medians over the runs. */
  ourShare: number
  peerShare: number
  /** 1 / (1 − the peer's share): the req/s ratio of a limiter costing nothing against the peer. */
  ceiling: number
}

/**
 * Each pair's ceiling (issue 46): ours and the peer profiled at once (both on one core, as in pairs.ts), `runs`
 * times; the medians of our units' share and of the peer's share (`peerShare`), and the ceiling from the peer's.
 */
export async function runCeilings(options: {
  frameworks: string[]
  pairs: (framework: string) => [string, string][]
  keys: number[]
  runs: number
  duration: number
  intervalUs: number
}): Promise<Ceiling[]> {
  const ceilings: Ceiling[] = []
  for (const framework of options.frameworks)
    for (const keys of options.keys) {
      const pairs = options.pairs(framework)
      const runs: ProfiledVariant[] = []
      for (let run = 0; run < options.runs; run++)
        runs.push(
          ...(await runProfiles({
            frameworks: [framework],
            variants: [],
            keys: [keys],
            duration: options.duration,
            intervalUs: options.intervalUs,
            before: false,
            together: pairs,
          })),
        )
      for (const [ours, peer] of pairs) {
        const of = (variant: string) => runs.filter((row) => row.variant === variant)
        const peerShares = of(peer).map((row) => peerShare(row.summary))
        const share = median(peerShares)
        ceilings.push({
          framework,
          keys,
          ours,
          peer,
          ourShare: median(of(ours).map((row) => ourShare(row.summary))),
          peerShare: share,
          ceiling: 1 / (1 - share),
        })
      }
    }
  return ceilings
}

export function ceilingTable(rows: readonly Ceiling[]): string {
  return table(
    ['framework', 'keys', 'ours', 'peer', 'our units share', 'peer share', 'ceiling'],
    rows.map((row) => [
      row.framework,
      row.keys.toLocaleString('en-US'),
      row.ours,
      row.peer,
      percent(row.ourShare, 1),
      percent(row.peerShare, 1),
      row.ceiling.toFixed(2),
    ]),
  )
}

const percent = (part: number, whole: number) => `${((100 * part) / (whole || 1)).toFixed(1)} %`
const perRequest = (us: number, responses: number) => (us / (responses || 1)).toFixed(2)

/**
 * The table of one framework and key count: per unit, each variant's share of its busy samples and µs per
 * response; the units no variant spent time in are left out.
 */
export function unitTable(rows: readonly ProfiledVariant[]): string {
  const shown = UNIT_ORDER.filter((unit) => rows.some((row) => row.summary.units[unit] > 0))
  return table(
    ['unit', ...rows.flatMap((row) => [`${row.variant} share`, `${row.variant} µs/req`])],
    [
      ...shown.map((unit) => [
        unit,
        ...rows.flatMap((row) => [
          percent(row.summary.units[unit], row.summary.busyUs),
          perRequest(row.summary.units[unit], row.responses),
        ]),
      ]),
      ['all (sampled)', ...rows.flatMap((row) => ['100 %', perRequest(row.summary.busyUs, row.responses)])],
    ],
  )
}

/** The functions of ours (not framework, Node, GC) with the most self time in one variant. */
export function topTable(row: ProfiledVariant, count: number): string {
  const top = [...row.summary.functions.entries()]
    .filter(([, fn]) => !NOT_OURS.has(fn.unit))
    .sort((a, b) => b[1].us - a[1].us)
    .slice(0, count)
  return table(
    ['function (file)', 'unit', 'µs/req', 'share'],
    top.map(([name, fn]) => [
      name,
      fn.unit,
      perRequest(fn.us, row.responses),
      percent(fn.us, row.summary.busyUs),
    ]),
  )
}

export function toJson(rows: readonly ProfiledVariant[]): unknown {
  const sorted = (map: Map<string, { unit: Unit; us: number }>, responses: number) =>
    [...map.entries()]
      .sort((a, b) => b[1].us - a[1].us)
      .map(([name, { unit, us }]) => ({ name, unit, usPerRequest: us / (responses || 1) }))
  return rows.map((row) => ({
    framework: row.framework,
    keys: row.keys,
    variant: row.variant,
    responses: row.responses,
    rps: row.rps,
    nodeUsPerRequest: row.nodeUs,
    sampledUsPerRequest: row.summary.busyUs / (row.responses || 1),
    units: Object.fromEntries(
      UNIT_ORDER.map((unit) => [
        unit,
        {
          share: row.summary.units[unit] / (row.summary.busyUs || 1),
          usPerRequest: row.summary.units[unit] / (row.responses || 1),
        },
      ]),
    ),
    files: sorted(row.summary.files, row.responses),
    functions: sorted(row.summary.functions, row.responses).slice(0, 100),
  }))
}

export function profileReport(rows: readonly ProfiledVariant[], top: number): string {
  const sections: string[] = []
  const groups = new Map<string, ProfiledVariant[]>()
  for (const row of rows) {
    const name = `${row.framework}, ${row.keys.toLocaleString('en-US')} key${row.keys > 1 ? 's' : ''}`
    groups.set(name, [...(groups.get(name) ?? []), row])
  }
  for (const [name, group] of groups) {
    const loads = group
      .map(
        (row) =>
          `${row.variant}: ${Math.round(row.rps).toLocaleString('en-US')} req/s, ${row.nodeUs.toFixed(1)} µs Node CPU/req`,
      )
      .join('; ')
    sections.push(`### ${name}\n\n${loads} (under the profiler)\n\n${unitTable(group)}`)
    if (top > 0)
      for (const row of group)
        sections.push(`Top ${top} functions of ours, ${row.variant}:\n\n${topTable(row, top)}`)
  }
  return sections.join('\n\n')
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const rows = await runProfiles({
    frameworks: (argument('frameworks') ?? 'express,koa,fastify,hono').split(','),
    variants: (argument('variants') ?? 'ratewindow,ratewindow-redis').split(','),
    keys: (argument('keys') ?? '1,10000').split(',').map(Number),
    duration: Number(argument('duration') ?? '5'),
    intervalUs: Number(argument('interval') ?? '250'),
    before: process.argv.includes('--before'),
  })
  if (process.argv.includes('--json')) console.log(JSON.stringify(toJson(rows), null, 2))
  else console.log(profileReport(rows, Number(argument('top') ?? '12')))
}
