/**
 * Paired runs on Nest + Fastify (issue 23): RateWindowModule's guard (MemoryStore) against @nestjs/throttler with
 * its default storage, and each against the bare Nest app, on the allowed path, for 1 and 10k client keys. As in
 * pairs.ts, the two servers of a pair run at once, pinned to core 1 with the load generator on core 0, so that the
 * ratio of their req/s is the inverse ratio of their costs; one warm-up second, then `rounds` runs; medians.
 *
 * Run alone (under the bench lock): pnpm --filter @ratewindow/bench nestjs [-- --rounds 5 --duration 2]
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process'
import { cpus } from 'node:os'
import { pathToFileURL } from 'node:url'
import { load, portOf, type Server } from './http.js'
import { type PairRow, pairsTable } from './pairs.js'
import { argument, median } from './stats.js'

const PAIRS: [string, string][] = [
  ['ratewindow', 'throttler'],
  ['ratewindow', 'bare'],
  ['throttler', 'bare'],
]

async function startNest(variant: string, cpu: string | undefined): Promise<Server> {
  const child: ChildProcess = spawn(process.execPath, ['nestjs-server.mjs', variant], {
    cwd: import.meta.dirname,
    stdio: ['ignore', 'pipe', 'inherit', 'ipc'],
  })
  if (cpu !== undefined) spawnSync('taskset', ['-a', '-p', '-c', cpu, String(child.pid)], { stdio: 'ignore' })
  try {
    return { port: await portOf(child, `nestjs ${variant}`), child }
  } catch (error) {
    child.kill()
    throw error
  }
}

export async function runNestPairs(options: { rounds?: number; duration?: number; keys?: number[] } = {}) {
  const rounds = options.rounds ?? 5
  const duration = options.duration ?? 2
  const pinned =
    cpus().length >= 2 &&
    spawnSync('taskset', ['-a', '-p', '-c', '0', String(process.pid)], { stdio: 'ignore' }).status === 0
  const rows: PairRow[] = []
  for (const keys of options.keys ?? [1, 10_000]) {
    for (const [config, reference] of PAIRS) {
      const servers = [await startNest(config, pinned ? '1' : undefined)]
      try {
        servers.push(await startNest(reference, pinned ? '1' : undefined))
        const measure = (seconds: number) =>
          Promise.all(servers.map((server) => load([server], keys, seconds, 25)))
        await measure(1)
        const samples: {
          ratio: number
          cost: number
          nodeUs: number
          refUs: number
          rps: number
          refRps: number
          busy: number
        }[] = []
        for (let round = 0; round < rounds; round++) {
          const [ours, theirs] = await measure(duration)
          samples.push({
            ratio: ours!.rps / theirs!.rps,
            cost: theirs!.nodeUs / ours!.nodeUs,
            nodeUs: ours!.nodeUs,
            refUs: theirs!.nodeUs,
            rps: ours!.rps,
            refRps: theirs!.rps,
            busy: (ours!.rps * ours!.nodeUs + theirs!.rps * theirs!.nodeUs) / 1e6,
          })
        }
        const of = (field: keyof (typeof samples)[number]) => median(samples.map((sample) => sample[field]))
        const ratios = samples.map((sample) => sample.ratio)
        rows.push({
          framework: 'nest-fastify',
          keys,
          config,
          reference,
          ratio: median(ratios),
          low: Math.min(...ratios),
          high: Math.max(...ratios),
          cost: of('cost'),
          busy: of('busy'),
          nodeUs: of('nodeUs'),
          referenceNodeUs: of('refUs'),
          rps: of('rps'),
          referenceRps: of('refRps'),
        })
      } finally {
        for (const { child } of servers) child.kill()
      }
      console.error(`nestjs: ${keys} key(s) ${config} vs ${reference} done`)
    }
  }
  return { rows, pinned }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const { rows, pinned } = await runNestPairs({
    rounds: Number(argument('rounds') ?? 5),
    duration: Number(argument('duration') ?? 2),
  })
  if (!pinned) console.error('nestjs: taskset unavailable: servers and load generator are not pinned')
  console.log(pairsTable(rows))
}
