/**
 * The process's `beforeExit`, for SyncedStore: the hooks of the open stores, behind one process listener
 * installed once. Node, Bun and Deno have a process to hook; Workers do not (nothing outlives a request there).
 */

const exitHooks = new Set<() => void>()
let listeningBeforeExit = false

/** @internal Calls `hook` on the process's `beforeExit` until `offBeforeExit(hook)`. */
export function onBeforeExit(hook: () => void): void {
  exitHooks.add(hook)
  const host = (globalThis as { process?: { on?: (event: 'beforeExit', listener: () => void) => unknown } })
    .process
  if (listeningBeforeExit || typeof host?.on !== 'function') return
  listeningBeforeExit = true
  host.on('beforeExit', () => {
    for (const each of exitHooks) each()
  })
}

/** @internal No longer calls `hook` on `beforeExit`. */
export function offBeforeExit(hook: () => void): void {
  exitHooks.delete(hook)
}
