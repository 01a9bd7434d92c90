/**
 * Memory per delayed request of `slowDown()` (issue 24): 100,000 requests of one client delayed at once in one
 * process, on the engine every adapter shares, and the heap used before and after (`--expose-gc`). Beside it,
 * for scale, what one platform timer per delayed request would add (express-slow-down's way): 100,000
 * `setTimeout`s with a closure each. Prints figures; passes or fails nothing. Not in `pnpm bench`: run it with
 * `pnpm --filter @ratewindow/bench slow-down-memory` after `pnpm build`.
 */
import { EventEmitter } from 'node:events'
import { MemoryStore } from '@ratewindow/core'
import { type FrameworkBinding, SlowDownEngine } from '@ratewindow/core/adapter'

const gc = (globalThis as { gc?: () => void }).gc
if (gc === undefined) throw new Error('run with --expose-gc')
const N = 100_000

type Req = { ip: string }
const binding: FrameworkBinding<Req> = {
  name: 'bench',
  clientIp: (request) => request.ip,
  untrustedForwardedFor: () => undefined,
  trustProxyHint: '',
}

/** What the engine reads of a response: its close event. */
class Response extends EventEmitter {
  statusCode = 200
  writableFinished = false
  destroyed = false
}

function heap(): number {
  gc!()
  gc!()
  return process.memoryUsage().heapUsed
}

const engine = new SlowDownEngine<Req, [Req]>(
  // Unbounded, as express-slow-down: the bounds on waiting (10 per key by default) would refuse all but 10.
  {
    store: new MemoryStore(),
    delayAfter: 0,
    delayMs: 60_000,
    windowMs: 3_600_000,
    maxPerKey: false,
    maxWaiting: false,
  },
  binding,
)
const requests = Array.from({ length: N }, () => ({ ip: '192.0.2.1' }))
const responses = Array.from({ length: N }, () => new Response())
let ran = 0
const before = heap()
for (let i = 0; i < N; i++) {
  const decided = engine.decide(requests[i]!, [requests[i]!])
  if (decided === undefined || decided instanceof Promise) throw new Error('expected a synchronous decision')
  engine.proceed(decided, [requests[i]!], responses[i]!, () => ran++)
}
const delayed = heap()
console.log(
  `slowDown: ${engine.waiting} requests delayed, ${Math.round((delayed - before) / N)} bytes each (decision, info, heap entry, closures, close listener), one timer`,
)
for (const response of responses) response.emit('close')
console.log(`after every client left: ${engine.waiting} waiting, ${ran} ran`)

const timersBefore = heap()
const timers = Array.from({ length: N }, (_, i) => setTimeout(() => ran + i, 60_000))
const timersAfter = heap()
console.log(
  `one setTimeout per request instead: ${Math.round((timersAfter - timersBefore) / N)} bytes more each`,
)
for (const timer of timers) clearTimeout(timer)
engine.close()
