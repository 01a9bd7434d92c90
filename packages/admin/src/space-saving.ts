/**
 * Space-Saving (Metwally, Agrawal, El Abbadi, 2005): the most frequent items of a stream in a fixed number of
 * counters. An item not counted takes the counter of the least counted one and its count plus one, so a count is
 * an upper bound, over by at most the count it took over (`error`); any item seen more than total / capacity times
 * is among those counted. A min-heap keeps the least counted at the root: O(log capacity) per item.
 */
export interface Counted {
  item: string
  count: number
  /** How much of `count` may belong to the items it replaced. */
  error: number
}

export class SpaceSaving {
  readonly capacity: number
  readonly #heap: Counted[] = []
  readonly #index = new Map<string, number>()

  constructor(capacity: number) {
    this.capacity = capacity
  }

  add(item: string): void {
    const at = this.#index.get(item)
    if (at !== undefined) {
      this.#heap[at]!.count += 1
      this.#down(at)
      return
    }
    if (this.#heap.length < this.capacity) {
      this.#heap.push({ item, count: 1, error: 0 })
      this.#index.set(item, this.#heap.length - 1)
      this.#up(this.#heap.length - 1)
      return
    }
    // NOTE: the least counted item leaves; the newcomer inherits its count as its possible error.
    const least = this.#heap[0]!
    this.#index.delete(least.item)
    this.#heap[0] = { item, count: least.count + 1, error: least.count }
    this.#index.set(item, 0)
    this.#down(0)
  }

  /** The `count` most counted items, most first. */
  top(count: number): Counted[] {
    return [...this.#heap]
      .sort((a, b) => b.count - a.count || a.item.localeCompare(b.item))
      .slice(0, count)
      .map((each) => ({ ...each }))
  }

  #up(at: number): void {
    while (at > 0) {
      const parent = (at - 1) >> 1
      if (this.#heap[parent]!.count <= this.#heap[at]!.count) return
      this.#swap(at, parent)
      at = parent
    }
  }

  #down(at: number): void {
    const heap = this.#heap
    for (;;) {
      const left = 2 * at + 1
      const right = left + 1
      let least = at
      if (left < heap.length && heap[left]!.count < heap[least]!.count) least = left
      if (right < heap.length && heap[right]!.count < heap[least]!.count) least = right
      if (least === at) return
      this.#swap(at, least)
      at = least
    }
  }

  #swap(a: number, b: number): void {
    const heap = this.#heap
    const first = heap[a]!
    heap[a] = heap[b]!
    heap[b] = first
    this.#index.set(heap[a]!.item, a)
    this.#index.set(heap[b]!.item, b)
  }
}
