/**
 * An in-process twin of the SyncedStore sync script (packages/core/src/stores/synced/script.ts), for simulations that
 * replay many requests with a driven clock: the same arithmetic on a Map instead of Redis hashes (TTLs are
 * implied by the window indexes). test/synced-store.test.ts demands that both give identical decisions.
 */
type Counts = { w: number; c: number; p: number }
export type SyncState = Map<string, Counts>

/** Runs the sync script's steps on `state`: adds the deltas in `args`, returns the reply. */
export function applySync(
  state: SyncState,
  keys: readonly string[],
  args: readonly (string | number)[],
): number[] {
  const now = Number(args[0])
  const out = [now]
  keys.forEach((key, i) => {
    const [window, dwin, dcurr, dprev] = String(args[1 + i])
      .split(':')
      .map(Number) as [number, number, number, number]
    const stored = state.get(key)
    // A key's window never moves back (a sender whose clock is behind the one that wrote it).
    const win = Math.max(Math.floor(now / window), stored?.w ?? Number.NEGATIVE_INFINITY)
    let curr = 0
    let prev = 0
    if (stored?.w === win) {
      curr = stored.c
      prev = stored.p
    } else if (stored?.w === win - 1) prev = stored.c
    if (dcurr !== 0 || dprev !== 0) {
      if (dwin > win) curr += dcurr + dprev
      else if (dwin === win) {
        curr += dcurr
        prev += dprev
      } else if (dwin === win - 1) prev += dcurr
      curr = Math.max(0, curr)
      prev = Math.max(0, prev)
      if (curr > 0 || prev > 0) state.set(key, { w: win, c: curr, p: prev })
      else state.delete(key)
    }
    out.push(win, curr, prev)
  })
  return out
}

export interface TwinRunner {
  run(script: unknown, keys: readonly string[], args: readonly (string | number)[]): Promise<number[]>
  /** Script calls so far: the round trips a real Redis would have served. */
  calls: number
}

/** A runner that executes every script at once on one shared in-process state. */
export function syncTwin(state: SyncState = new Map()): TwinRunner {
  const twin: TwinRunner = {
    calls: 0,
    async run(_script, keys, args) {
      twin.calls++
      return applySync(state, keys, args)
    },
  }
  return twin
}

/** Stand-in client for stores whose runner is a twin: it is never called. */
const unused = async (): Promise<never> => {
  throw new Error('a twin-backed SyncedStore sends nothing to Redis')
}
export const NO_CLIENT = { family: 'sync-twin', cluster: false, evalSha: unused, eval: unused, del: unused }
