/**
 * HTTP overhead: req/s and latency with autocannon on 127.0.0.1 for each framework bare and with rate
 * limiting, measured side by side in one run, as ratios to the bare framework. Each server runs in its own
 * process; configurations alternate within each round and the median of the rounds is reported.
 *
 * Run: pnpm --filter @ratewindow/bench http [-- --rounds 3 --duration 5 --variants ratewindow]
 */
import { type ChildProcess, spawn } from 'node:child_process'
import { once } from 'node:events'
import autocannon from 'autocannon'
import { median, table } from './stats.js'

const argument = (name: string, fallback: string) => {
  const index = process.argv.indexOf(`--${name}`)
  return index > 0 ? process.argv[index + 1]! : fallback
}
const ROUNDS = Number(argument('rounds', '3'))
const DURATION = Number(argument('duration', '5'))
const FRAMEWORKS = argument('frameworks', 'express,koa,fastify').split(',')
const VARIANTS = argument('variants', 'ratewindow').split(',')
const PATHS = argument('paths', 'allowed').split(',')
const KEYS = argument('keys', '1').split(',').map(Number)

interface Sample {
  rps: number
  p50: number
  p99: number
}

async function startServer(
  framework: string,
  variant: string,
  path: string,
): Promise<{ port: number; child: ChildProcess }> {
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', '--conditions=@ratewindow/source', 'http-server.ts', framework, variant, path],
    {
      cwd: import.meta.dirname,
      stdio: ['ignore', 'pipe', 'inherit'],
      env: process.env,
    },
  )
  const [line] = (await once(child.stdout!, 'data')) as [Buffer]
  return { port: JSON.parse(line.toString()).port, child }
}

async function measure(framework: string, variant: string, path: string, keys: number): Promise<Sample> {
  const { port, child } = await startServer(framework, variant, path)
  try {
    let next = 0
    const load = (duration: number) =>
      autocannon({
        url: `http://127.0.0.1:${port}/`,
        connections: 50,
        duration,
        requests: [
          {
            setupRequest: (request) => {
              const client = next++ % keys
              const address = `10.${(client >> 16) & 255}.${(client >> 8) & 255}.${client & 255}`
              return { ...request, headers: { ...request.headers, 'x-forwarded-for': address } }
            },
          },
        ],
      })
    await load(1) // warm-up (JIT, and the denied path's first request)
    const result = await load(DURATION)
    return { rps: result.requests.average, p50: result.latency.p50, p99: result.latency.p99 }
  } finally {
    child.kill()
    await once(child, 'exit')
  }
}

const rows: string[][] = []
for (const framework of FRAMEWORKS) {
  for (const path of PATHS) {
    for (const keys of KEYS) {
      const configs = ['bare', ...VARIANTS]
      const samples = new Map<string, Sample[]>(configs.map((config) => [config, []]))
      for (let round = 0; round < ROUNDS; round++) {
        for (const config of configs) samples.get(config)!.push(await measure(framework, config, path, keys))
      }
      const bareRps = median(samples.get('bare')!.map((sample) => sample.rps))
      for (const config of configs) {
        const list = samples.get(config)!
        const rps = median(list.map((sample) => sample.rps))
        rows.push([
          framework,
          path,
          String(keys),
          config,
          Math.round(rps).toLocaleString('en-US'),
          (rps / bareRps).toFixed(2),
          String(median(list.map((sample) => sample.p50))),
          String(median(list.map((sample) => sample.p99))),
        ])
      }
      console.error(`done: ${framework} ${path} ${keys} key(s)`)
    }
  }
}
console.log(
  `\nautocannon, 50 connections, ${DURATION} s per run, median of ${ROUNDS} alternating rounds, Node ${process.version}\n`,
)
console.log(
  table(['framework', 'path', 'keys', 'configuration', 'req/s', 'ratio to bare', 'p50 ms', 'p99 ms'], rows),
)
