/** Test doubles for the core's store tests. */
import type { Decision, Store, StoreRequest } from '../../src/index.js'
import { MemoryStore } from '../../src/index.js'

/** Wraps a store, counting calls and failing on demand. */
export class CountingStore implements Store {
  calls = 0
  failing = false
  hang = false
  constructor(readonly inner: Store = new MemoryStore()) {}
  async consume(request: StoreRequest): Promise<Decision> {
    this.calls++
    if (this.hang) return new Promise(() => {})
    if (this.failing) throw new Error('store down')
    return this.inner.consume(request)
  }
  async peek(request: StoreRequest): Promise<Decision> {
    return this.inner.peek(request)
  }
  async refund(): Promise<void> {}
  async reset(): Promise<void> {}
}

/** A store with only the four methods every store has (none of the optional ones: `charge`, `reserve`, `scanStored`…). */
export function plainStore(inner: Store = new MemoryStore()): Store {
  return {
    consume: (request) => inner.consume(request),
    peek: (request) => inner.peek(request),
    refund: (request) => inner.refund(request),
    reset: (target) => inner.reset(target),
  }
}
