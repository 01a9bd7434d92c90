/**
 * `RedisScriptRunner.whenReady` for a client that says its state and emits events (ioredis, iovalkey, node-redis):
 * one wait per runner, settled by the first event after which the client is no longer connecting.
 */

/** Where a client stands: ready for commands, making its first connection (calls are held), or closed. */
export type ClientState = 'ready' | 'connecting' | 'closed'

/** The part of an event-emitting client the wait uses (Node's `EventEmitter`). */
export interface ClientEvents {
  on(event: string, listener: () => void): unknown
  removeListener(event: string, listener: () => void): unknown
}

/** True when `client` has the event methods of `ClientEvents`. */
export function hasEvents(client: unknown): client is ClientEvents {
  const candidate = client as Partial<Record<keyof ClientEvents, unknown>>
  return typeof candidate.on === 'function' && typeof candidate.removeListener === 'function'
}

/**
 * Holds while `state()` is `'connecting'` and the client has never been `'ready'`: a client that reconnects after it
 * was ready is not held (its calls are bounded by the limiter's `timeout`, as a fault is). `events` are those after
 * which the state may have changed; `connect` is called once when the wait begins (a client that connects on its
 * first command, which it will not get meanwhile).
 */
export function firstReady(
  client: ClientEvents,
  state: () => ClientState,
  events: readonly string[],
  connect?: () => void,
): () => Promise<void> | undefined {
  let ready = false
  let waiting: Promise<void> | undefined
  return () => {
    if (ready) return undefined
    const now = state()
    if (now === 'ready') ready = true
    if (now !== 'connecting') return undefined
    if (waiting === undefined) {
      waiting = new Promise<void>((resolve) => {
        const changed = () => {
          if (state() === 'connecting') return
          for (const event of events) client.removeListener(event, changed)
          waiting = undefined
          resolve()
        }
        for (const event of events) client.on(event, changed)
      })
      connect?.()
    }
    return waiting
  }
}
