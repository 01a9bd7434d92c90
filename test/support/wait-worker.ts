/**
 * An application process that calls `limiter.wait()` on a real Redis: started with child_process.fork by
 * test/wait-processes.test.ts (and bench/waiting.ts). argv: port, prefix, key, calls, rule (`gcra:<limit>:<window
 * ms>`, burst 1, or `log:<limit>:<window ms>`), spread (ms between calls; 0: every call at once), leave (percent of
 * the calls that give up waiting once every call has its slot; 0 by default), then (calls made after those left) and
 * horizon (the limiter's `reservationHorizon`, default its own). On the parent's `go`, it sends its calls and
 * reports, per call in call order, the reserved slot (`at`, the Redis server's time), the wait it was given and when
 * it resolved here (a call that left, or was refused: its `error`). Each decision is also reported as it is made
 * (`decided`, with its slot), for a parent that kills the worker while its calls wait (bench/waiting-faults.ts).
 */
import { type Duration, gcra, RateLimiter, RedisStore, slidingWindowLog } from '@ratewindow/core'
import { Redis } from 'ioredis'

const [
  port,
  prefix = '',
  key = '',
  calls = '1',
  spec = 'gcra:10:1000',
  spread = '0',
  leave = '0',
  then = '0',
  horizon,
] = process.argv.slice(2)
const [kind, limit, window] = spec.split(':')
const client = new Redis({ host: '127.0.0.1', port: Number(port), maxRetriesPerRequest: 1 })
client.on('error', () => {}) // a Redis restarted under it (bench/waiting-faults.ts): the limiter reports its own
const rule =
  kind === 'log'
    ? slidingWindowLog({ limit: Number(limit), window: Number(window) })
    : gcra({ limit: Number(limit), window: Number(window), burst: 1 })
let decided = 0
let allDecided = () => {}
const everyCallDecided = new Promise<void>((resolve) => {
  allDecided = resolve
})
const limiter = new RateLimiter({
  rules: rule,
  prefix,
  store: new RedisStore({ client }),
  timeout: '10s',
  ...(horizon === undefined ? {} : { reservationHorizon: horizon as Duration }),
  observer: {
    onDecision: ({ result }) => {
      process.send?.({ type: 'decided', at: result.at, allowed: result.allowed })
      if (++decided === Number(calls)) allDecided()
    },
  },
})

type Slot = { at: number; delay: number; resolvedAt: number }

function call(signal?: AbortSignal): Promise<Slot> {
  return limiter.wait(key, { maxWait: '1m', signal }).then((result) => ({
    at: result.at,
    delay: result.delay ?? 0,
    resolvedAt: Date.now(),
  }))
}

/** Whether call `i` gives up: spread over the calls, differently in each process. */
const leaves = (i: number) => ((i + 1) * 37 + process.pid) % 100 < Number(leave)

process.on('message', async (message: { type: string }) => {
  if (message.type !== 'go') return
  const sent: Promise<Slot>[] = []
  const controllers: AbortController[] = []
  for (let i = 0; i < Number(calls); i++) {
    if (i > 0 && Number(spread) > 0) await new Promise((resolve) => setTimeout(resolve, Number(spread)))
    const controller = new AbortController()
    controllers.push(controller)
    sent.push(call(controller.signal))
  }
  if (Number(leave) > 0 || Number(then) > 0) {
    await everyCallDecided
    controllers.forEach((controller, i) => {
      if (leaves(i)) controller.abort()
    })
    for (let i = 0; i < Number(then); i++) sent.push(call())
  }
  const settled = await Promise.allSettled(sent)
  process.send?.({
    type: 'done',
    slots: settled.map((each) => (each.status === 'fulfilled' ? each.value : { error: String(each.reason) })),
  })
  client.disconnect()
})
process.send?.({ type: 'ready' })
