/** The parts of the Workers runtime's Durable Object types the store and the object use. */

/**
 * The part of a Durable Object namespace binding the store uses (`env.RATE_LIMITER`, typed
 * `DurableObjectNamespace` by `@cloudflare/workers-types`): written here so that you need no types package.
 */
// biome-ignore lint/suspicious/noExplicitAny: the id type is the runtime's (DurableObjectId).
export interface DurableObjectNamespaceLike<Id = any> {
  idFromName(name: string): Id
  get(id: Id): DurableObjectStubLike
}

/** A Durable Object stub: the store talks to its objects with `fetch`. */
export interface DurableObjectStubLike {
  fetch(input: string, init: { method: string; body: string }): Promise<DurableObjectResponseLike>
}

/** The part of a `Response` the store reads. */
export interface DurableObjectResponseLike {
  readonly ok: boolean
  readonly status: number
  text(): Promise<string>
}

/** The part of a Durable Object's storage (`ctx.storage`) the object uses. */
export interface DurableObjectStorageLike {
  get(key: string): Promise<unknown>
  put(key: string, value: unknown): Promise<void>
  delete(key: string): Promise<boolean>
  /** `prefix`: the keys that start with it only (listing override records). */
  list(options: { prefix?: string; startAfter?: string; limit?: number }): Promise<Map<string, unknown>>
  getAlarm(): Promise<number | null>
  setAlarm(scheduledTime: number): Promise<void>
}

/** The Durable Object's state, as the runtime passes it to the constructor. */
export interface DurableObjectStateLike {
  readonly storage: DurableObjectStorageLike
}

/** @deprecated `DurableObjectResponseLike` (`ResponseLike` is also @ratewindow/testing's); this name stays until 1.0. */
export type ResponseLike = DurableObjectResponseLike
