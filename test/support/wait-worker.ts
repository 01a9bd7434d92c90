/**
 * An application process that calls `limiter.wait()` on a real Redis: started with child_process.fork by
 * test/wait-processes.test.ts (and bench/waiting.ts). argv: port, prefix, key, calls, rule (`gcra:<limit>:<window
 * ms>`, burst 1, or `log:<limit>:<window ms>`), spread (ms between calls; 0: every call at once). On the parent's `go`,
 * it sends its calls and reports, per call in call order, the reserved slot (`at`, the Redis server's time), the wait it was given and when it resolved here.
 */
import { gcra, RateLimiter, RedisStore, slidingWindowLog } from '@ratewindow/core'
import { Redis } from 'ioredis'

const [port, prefix = '', key = '', calls = '1', spec = 'gcra:10:1000', spread = '0'] = process.argv.slice(2)
const [kind, limit, window] = spec.split(':')
const client = new Redis({ host: '127.0.0.1', port: Number(port), maxRetriesPerRequest: 1 })
const rule =
  kind === 'log'
    ? slidingWindowLog({ limit: Number(limit), window: Number(window) })
    : gcra({ limit: Number(limit), window: Number(window), burst: 1 })
const limiter = new RateLimiter({ rules: rule, prefix, store: new RedisStore({ client }), timeout: '10s' })

process.on('message', async (message: { type: string }) => {
  if (message.type !== 'go') return
  const sent: Promise<{ at: number; delay: number; resolvedAt: number }>[] = []
  for (let i = 0; i < Number(calls); i++) {
    if (i > 0 && Number(spread) > 0) await new Promise((resolve) => setTimeout(resolve, Number(spread)))
    sent.push(
      limiter.wait(key, { maxWait: '1m' }).then((result) => ({
        at: result.at,
        delay: result.delay ?? 0,
        resolvedAt: Date.now(),
      })),
    )
  }
  const settled = await Promise.allSettled(sent)
  process.send?.({
    type: 'done',
    slots: settled.map((each) => (each.status === 'fulfilled' ? each.value : { error: String(each.reason) })),
  })
  client.disconnect()
})
process.send?.({ type: 'ready' })
