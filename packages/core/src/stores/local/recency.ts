/** @internal An item of a `RecencyList`: its neighbours, `older` towards the least recently used end. */
export interface Linked<T> {
  older: T | undefined
  newer: T | undefined
}

/**
 * @internal Least-recently-used order through the items themselves (a doubly linked list): O(1) to touch, to
 * remove and to find the oldest, with no holes left behind in a Map (see MemoryStore's note). The recency of
 * MemoryStore's and SyncedStore's keys.
 */
export class RecencyList<T extends Linked<T>> {
  #leastRecent: T | undefined
  #mostRecent: T | undefined

  get leastRecent(): T | undefined {
    return this.#leastRecent
  }

  /** Marks `item` most recently used (appending it if it was not in the list). */
  touch(item: T): void {
    if (item === this.#mostRecent) return
    this.remove(item)
    item.older = this.#mostRecent
    item.newer = undefined
    if (this.#mostRecent !== undefined) this.#mostRecent.newer = item
    else this.#leastRecent = item
    this.#mostRecent = item
  }

  /** Forgets every item at once (their own links are left as they are: the caller drops them too). */
  clear(): void {
    this.#leastRecent = undefined
    this.#mostRecent = undefined
  }

  /** Takes `item` out of the list (nothing happens if it is not in it). */
  remove(item: T): void {
    if (item.older !== undefined) item.older.newer = item.newer
    else if (this.#leastRecent === item) this.#leastRecent = item.newer
    if (item.newer !== undefined) item.newer.older = item.older
    else if (this.#mostRecent === item) this.#mostRecent = item.older
    item.older = undefined
    item.newer = undefined
  }
}
