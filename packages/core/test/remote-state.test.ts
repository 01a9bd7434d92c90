/**
 * The remote-store kit (stores/local/remote.ts: encodeStoreRequest, applyToKeyState, acquireLease): a store that keeps
 * every client's state as plain data, structured-cloned on every read and write as a Durable Object's storage
 * does, passes the store conformance suite that MemoryStore passes. @ratewindow/cloudflare is built on it.
 */
import type {
  ConcurrencyStore,
  Decision,
  LeaseDecision,
  LeaseRequest,
  RefundRequest,
  Store,
  StoreRequest,
  StoreTarget,
} from '@ratewindow/core'
import {
  acquireLease,
  applyToKeyState,
  encodeStoreRequest,
  type KeyState,
  keyStateId,
  type LeaseState,
  releaseLease,
  remoteDecision,
} from '@ratewindow/core/remote'
import { describeStoreConformance } from '@ratewindow/testing'
import { describe, expect, it } from 'vitest'

/** State as plain data in a map, copied in and out (structuredClone) as a Durable Object's storage does. */
class PlainDataStore implements Store, ConcurrencyStore {
  readonly penalties = true
  readonly quotas = true
  readonly plans = true
  readonly #data = new Map<string, unknown>()
  constructor(readonly clock: () => number) {}

  #run(operation: 'consume' | 'peek' | 'refund' | 'charge', request: StoreRequest) {
    // Through JSON, as a fetch body carries it.
    const encoded = JSON.parse(JSON.stringify(encodeStoreRequest(request)))
    const id = keyStateId(encoded)
    const stored = this.#data.get(id) as KeyState | undefined
    const result = applyToKeyState(operation, encoded, structuredClone(stored), this.clock())
    if (result.changed) {
      if (result.state === undefined) this.#data.delete(id)
      else this.#data.set(id, structuredClone(result.state))
    }
    return result
  }

  // The calling side makes the rules in force again (a plan's limits travel as data).
  consume(request: StoreRequest): Decision {
    return remoteDecision(request, this.#run('consume', request).decision!)
  }
  peek(request: StoreRequest): Decision {
    return remoteDecision(request, this.#run('peek', request).decision!)
  }
  refund(request: RefundRequest): void {
    this.#run('refund', request)
  }
  charge(request: StoreRequest): { charged: number } {
    return { charged: this.#run('charge', request).charged! }
  }
  reset(target: StoreTarget): void {
    this.#data.delete(keyStateId(encodeStoreRequest(target)))
  }
  acquire(request: LeaseRequest): LeaseDecision {
    const id = `lease\u0000${request.prefix}\u0000${request.key}`
    const { decision, leases } = acquireLease(this.#data.get(id) as LeaseState, request, this.clock())
    if (leases === undefined) this.#data.delete(id)
    else this.#data.set(id, leases)
    return decision
  }
  release(request: Omit<LeaseRequest, 'limit'>): void {
    const id = `lease\u0000${request.prefix}\u0000${request.key}`
    const leases = releaseLease(this.#data.get(id) as LeaseState, request.id)
    if (leases === undefined) this.#data.delete(id)
    else this.#data.set(id, leases)
  }
}

describeStoreConformance(
  { describe, it, expect },
  {
    name: 'plain-data state (remote-store kit)',
    createStore: (clock) => new PlainDataStore(clock.read),
    quotas: true,
    plans: true,
  },
)

describe('remote-store kit: leases', () => {
  it('admits up to the limit, drops expired leases, and frees a slot on release', () => {
    let leases: LeaseState | undefined
    const take = (id: string, now: number) => {
      const result = acquireLease(leases, { id, limit: 2, leaseMs: 1_000 }, now)
      leases = result.leases
      return result.decision
    }
    expect(take('a', 0)).toEqual({ allowed: true, inFlight: 1, nextExpiry: 1_000 })
    expect(take('b', 100)).toEqual({ allowed: true, inFlight: 2, nextExpiry: 900 })
    expect(take('c', 200)).toEqual({ allowed: false, inFlight: 2, nextExpiry: 800 })
    leases = releaseLease(leases, 'a')
    expect(take('c', 300)).toMatchObject({ allowed: true, inFlight: 2 })
    expect(take('d', 1_300)).toEqual({ allowed: true, inFlight: 1, nextExpiry: 1_000 }) // b and c expired
    expect(releaseLease(releaseLease(leases, 'd'), 'nobody')).toBeUndefined()
  })
})
