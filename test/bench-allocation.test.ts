/**
 * The allocation bench's reading of the GC trace (bench/allocation.ts, issue 33), and a server started with that
 * trace on: its lines come before the port line, which startServer must still find.
 */
import { describe, expect, it } from 'vitest'
import { GcTrace } from '../bench/allocation.js'
import { startServer } from '../bench/http.js'
import { until } from './support/connections.js'

const line = (kind: string, allocated: number) =>
  `[1:0x1]  89 ms: pause=2.3 mutator=78.4 gc=${kind} reduce_memory=0 scavenge=0.41 total_size_before=4074320 allocated=${allocated} promoted=0\n`

describe('bench allocation', () => {
  it('counts scavenges and major GCs and sums the bytes of every GC, lines split across chunks', () => {
    const trace = new GcTrace()
    const text = `{"port":1}\n${line('s', 1000)}${line('mc', 500)}${line('s', 2000)}`
    trace.read(text.slice(0, 150))
    trace.read(text.slice(150))
    expect(trace.snapshot()).toEqual({ scavenges: 2, majors: 1, bytes: 3500 })
  })

  it('starts a server whose GC trace comes before its port line, and follows the trace', async () => {
    const flags = process.env.BENCH_NODE_FLAGS
    process.env.BENCH_NODE_FLAGS = '--conditions=@ratewindow/source' // the sources: no build needed
    try {
      const server = await startServer('koa', 'bare', 'allowed', 'redis://127.0.0.1:9', undefined, [
        '--min-semi-space-size=1',
        '--max-semi-space-size=1',
        '--trace-gc-nvp',
      ])
      try {
        const trace = GcTrace.of(server.child)
        expect(server.port).toBeGreaterThan(0)
        // Enough requests to fill the young generation a few times.
        for (let i = 0; i < 300; i++) await (await fetch(`http://127.0.0.1:${server.port}/`)).text()
        await until(() => trace.count.scavenges > 0, 'a scavenge line from the server', { within: 20_000 })
      } finally {
        server.child.kill()
      }
    } finally {
      if (flags === undefined) delete process.env.BENCH_NODE_FLAGS
      else process.env.BENCH_NODE_FLAGS = flags
    }
  }, 60_000)
})
