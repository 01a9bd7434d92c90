import { type Decision, MemoryStore, type StoreRequest } from '@ratewindow/core'
import { describeStoreConformance } from '@ratewindow/testing'
import { describe, expect, it } from 'vitest'
import { decisionRecord } from '../packages/core/src/stores/local/decide.js'

describeStoreConformance(
  { describe, it, expect },
  {
    name: 'MemoryStore',
    createStore: (clock) => new MemoryStore({ clock: clock.read }),
    reserves: true,
    overrides: true,
    quotas: true,
    plans: true,
  },
)

/**
 * The store as the limiter's local path sees it: every `consume` the store takes on that path is decided by
 * `decideInto` into one reused record, and read back as the `Decision` `consume` answers, so that the whole suite
 * checks that path against the contract (requests it leaves to `consume` go there, as on the limiter's path).
 */
function localPathView(store: MemoryStore): MemoryStore {
  const record = decisionRecord()
  const consume = (request: StoreRequest): Decision => {
    if (!store.decideInto(request, record)) return store.consume(request)
    const { allowed, now, blocked, wait } = record
    const outcomes = request.rules.map((_, i) => ({
      remaining: record.remaining[i]!,
      reset: record.reset[i]!,
      retryAfter: record.retryAfter[i]!,
    }))
    const decision: Decision = { allowed, now, outcomes }
    if (blocked > 0) decision.blocked = blocked
    if (wait > 0) decision.wait = wait
    return decision
  }
  return new Proxy(store, {
    get(target, name) {
      if (name === 'consume') return consume
      // Limiters made on the view call `consume`, not the local path.
      if (name === 'decideInto') return undefined
      const value: unknown = Reflect.get(target, name, target)
      return typeof value === 'function' ? value.bind(target) : value
    },
  })
}

describeStoreConformance(
  { describe, it, expect },
  {
    name: 'MemoryStore, the local path (decideInto)',
    createStore: (clock) => localPathView(new MemoryStore({ clock: clock.read })),
    reserves: true,
    overrides: true,
    quotas: true,
    plans: true,
  },
)
