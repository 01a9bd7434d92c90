/**
 * An in-process twin of the SyncedStore sync script (packages/core/src/sync/script.ts), for simulations that
 * replay millions of requests with a driven clock: the same arithmetic on a Map instead of Redis hashes (TTLs
 * are implied by the window indexes). test/synced-store.test.ts demands that both give identical replies.
 */
type Counts = { w: number; c: number; p: number }

export interface TwinRunner {
  run(script: unknown, keys: readonly string[], args: readonly (string | number)[]): Promise<number[]>
  /** Script calls so far: the round trips a real Redis would have served. */
  calls: number
}

export function syncTwin(): TwinRunner {
  const state = new Map<string, Counts>()
  const twin: TwinRunner = {
    calls: 0,
    async run(_script, keys, args) {
      twin.calls++
      const now = Number(args[0])
      const out = [now]
      keys.forEach((key, i) => {
        const [window, dwin, dcurr, dprev] = args.slice(1 + 4 * i, 5 + 4 * i).map(Number) as [
          number,
          number,
          number,
          number,
        ]
        const win = Math.floor(now / window)
        const stored = state.get(key)
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
    },
  }
  return twin
}
