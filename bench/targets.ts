/**
 * Issue 46's targets, judged on one `pnpm bench` run (bench/index.ts): the paired runs (both measures, req/s and
 * cost, unless a target names one), the profiles and allocation against BENCH_BEFORE, the core loop interleaved
 * with BENCH_BEFORE's, and the fixed-group Redis CPU. A row is `–` where the issue asks for a figure only.
 */
import type { AllocationRow } from './allocation.js'
import { type PairRow, worstRatio } from './pairs.js'
import { ourShare, type ProfiledVariant } from './profile.js'
import type { GroupedCpuRow, NodeCpuFigures } from './redis.js'

export interface TargetInputs {
  pairs: readonly PairRow[]
  profiles: readonly ProfiledVariant[]
  allocation: readonly AllocationRow[]
  core: readonly { keys: number; ratio: number }[] | undefined
  groups: readonly GroupedCpuRow[]
  node: NodeCpuFigures
}

/** The like-for-like memory target per framework: our configuration, the peer, the least ratio. */
const LIKE_FOR_LIKE: Record<string, [string, string, number]> = {
  express: ['ratewindow-no-headers', 'rate-limiter-flexible', 0.98],
  koa: ['ratewindow-no-headers', 'rate-limiter-flexible', 1],
  fastify: ['ratewindow-no-headers', 'rate-limiter-flexible', 1],
  hono: ['ratewindow', 'hono-rate-limiter', 0.97],
}
/** The peer our default headers must beat by 3 %, per framework. */
const DEFAULT_HEADERS_PEER: Record<string, string> = {
  express: 'express-rate-limit',
  koa: 'koa-ratelimit',
  fastify: '@fastify/rate-limit',
}
const FLOOR_KEY: Record<string, number> = { express: 0.93, koa: 0.97, fastify: 0.97, hono: 0.93 }
const FRAMEWORKS = ['express', 'koa', 'fastify', 'hono']
const KEYS = [1, 10_000]

export function issue46Targets(inputs: TargetInputs): string {
  const lines = ['| target | framework | keys | measured | met |', '| --- | --- | --- | --- | --- |']
  const row = (target: string, framework: string, keys: number | string, measured: string, met?: boolean) =>
    lines.push(
      `| ${target} | ${framework} | ${keys} | ${measured} | ${met === undefined ? '–' : met ? 'yes' : 'no'} |`,
    )
  const both = (pair: PairRow) =>
    `${pair.ratio.toFixed(2)} req/s, ${pair.cost.toFixed(2)} cost (${pair.config} vs ${pair.reference})`
  for (const framework of FRAMEWORKS)
    for (const keys of KEYS) {
      const pair = (config: string, reference: string) =>
        inputs.pairs.find(
          (each) =>
            each.framework === framework &&
            each.keys === keys &&
            each.config === config &&
            each.reference === reference,
        )
      const judge = (target: string, config: string, reference: string, least?: number) => {
        const found = pair(config, reference)
        if (found)
          row(
            target,
            framework,
            keys,
            both(found),
            least === undefined ? undefined : worstRatio(found) >= least,
          )
        else row(target, framework, keys, 'not measured', least === undefined ? undefined : false)
      }
      const [ours, peer, least] = LIKE_FOR_LIKE[framework]!
      judge(`memory, like for like, ≥ ${least.toFixed(2)} × ${peer}`, ours, peer, least)
      if (framework === 'express')
        judge(
          'memory, like for like, against the reference that sets `req.rateLimit` (reported)',
          ours,
          'rate-limiter-flexible-req',
        )
      const headersPeer = DEFAULT_HEADERS_PEER[framework]
      if (headersPeer)
        judge(
          `memory, our default headers, ≥ 1.03 × ${headersPeer}`,
          'ratewindow-default-headers',
          headersPeer,
          1.03,
        )
      judge(
        `memory ≥ ${FLOOR_KEY[framework]!.toFixed(2)} of \`floor-key\``,
        'ratewindow',
        'floor-key',
        FLOOR_KEY[framework],
      )
      judge('the compiled pipeline against the general one (reported)', 'ratewindow', 'ratewindow-general')
      if (framework !== 'hono') {
        judge(
          'RedisStore ≥ 1.05 × rate-limiter-flexible on Redis',
          'ratewindow-redis',
          'rate-limiter-flexible-redis',
          1.05,
        )
        judge('RedisStore ≥ 0.90 of the grouped floor', 'ratewindow-redis', 'floor-redis-grouped', 0.9)
      }
      for (const variant of ['ratewindow-no-headers', 'ratewindow']) {
        const profiled = (name: string) =>
          inputs.profiles.find(
            (each) => each.framework === framework && each.keys === keys && each.variant === name,
          )
        const now = profiled(variant)
        const before = profiled(`${variant}@before`)
        if (now && before) {
          const ratio = ourShare(now.summary) / ourShare(before.summary)
          row(
            `our units' share ≤ 0.65 × 41bbd39's (${variant})`,
            framework,
            keys,
            `${(100 * ourShare(now.summary)).toFixed(1)} % / ${(100 * ourShare(before.summary)).toFixed(1)} % = ${ratio.toFixed(2)} ×`,
            ratio <= 0.65,
          )
        } else row(`our units' share ≤ 0.65 × 41bbd39's (${variant})`, framework, keys, 'not measured', false)
      }
      for (const variant of ['ratewindow', 'ratewindow-redis']) {
        if (framework === 'hono' && variant === 'ratewindow-redis') continue
        const measured = (name: string) =>
          inputs.allocation.find(
            (each) => each.framework === framework && each.keys === keys && each.variant === name,
          )
        const now = measured(variant)?.ourScavengesPer100k
        const before = measured(`${variant}@before`)?.ourScavengesPer100k
        const target = `allocation per decision ≤ 0.6 × 41bbd39's (${variant}, minor GCs − bare)`
        if (now !== undefined && before !== undefined && before > 0)
          row(
            target,
            framework,
            keys,
            `${now.toFixed(0)} / ${before.toFixed(0)} = ${(now / before).toFixed(2)} ×`,
            now / before <= 0.6,
          )
        else row(target, framework, keys, 'not measured', false)
      }
    }
  for (const keys of KEYS) {
    const loop = inputs.core?.find((each) => each.keys === keys)
    row(
      'bench/core.ts loop ≥ 1.3 × 41bbd39 (`MemoryStore`, sliding window counter)',
      'core',
      keys,
      loop ? `${loop.ratio.toFixed(2)} ×` : 'not measured (BENCH_BEFORE unset)',
      loop ? loop.ratio >= 1.3 : false,
    )
    for (const group of inputs.groups.filter((each) => each.keys === keys)) {
      const most = keys === 1 ? 0.6 : 0.7
      row(
        `Redis CPU per decision ≤ ${most} × the per-request floor's, groups of ${group.group}`,
        'RedisStore',
        keys,
        `${group.oursUs.toFixed(2)} µs / ${group.floorUs.toFixed(2)} µs = ${group.ratio.toFixed(2)} ×`,
        group.ratio <= most,
      )
    }
  }
  const { node } = inputs
  row(
    'Node CPU per decision, a new key each, −25 % against 41bbd39',
    'RedisStore',
    'new',
    node.ratio === undefined
      ? `${node.ours.toFixed(1)} µs (BENCH_BEFORE unset)`
      : `${node.ours.toFixed(1)} µs / ${node.before!.toFixed(1)} µs = ${node.ratio.toFixed(2)} ×`,
    node.ratio !== undefined && node.ratio <= 0.75,
  )
  return lines.join('\n')
}
