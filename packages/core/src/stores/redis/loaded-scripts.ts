import { isNoScript, type RedisScriptRunner } from './clients/index.js'
import { clusterSlot } from './cluster-slot.js'
import type { Script } from './script.js'

/**
 * Which scripts each node of one client is known to hold, so that calls keep their order (issue 18). Several
 * calls may be in flight to a node at once; if one of them were answered NOSCRIPT and sent again as EVAL, a later
 * call with a script the node does hold (the same rule set's grouped script, say) would run before it, out of
 * order. So a script goes by EVAL (which loads it) until the node has answered one call of it, and by EVALSHA
 * after. When a node loses its scripts (restart, failover, SCRIPT FLUSH), EVALSHA is answered NOSCRIPT and sent
 * again as EVAL, in the order those answers come. A Cluster client without `nodeOf` cannot say which node a call
 * goes to: its calls go by EVALSHA first, one flight per slot at a time (`tracked` is false).
 */
export class LoadedScripts {
  readonly #runner: RedisScriptRunner
  /** `node \n sha1` of the scripts each node answered. Bounded by rule sets × nodes. */
  readonly #loaded = new Set<string>()
  /** Whether the node of each call is known (standalone, or a Cluster client with `nodeOf`). */
  readonly tracked: boolean

  constructor(runner: RedisScriptRunner) {
    this.#runner = runner
    this.tracked = !runner.cluster || typeof runner.nodeOf === 'function'
  }

  run(script: Script, keys: readonly string[], args: readonly string[]): Promise<unknown> {
    const runner = this.#runner
    // On a Cluster, the node that serves the keys' slot as the client last saw it (unknown: EVAL, not recorded).
    const node = !runner.cluster ? '' : this.tracked ? runner.nodeOf!(clusterSlot(keys[0]!)) : undefined
    const id = node === undefined ? undefined : `${node}\n${script.sha1}`
    const loaded = this.#loaded
    if (this.tracked && (id === undefined || !loaded.has(id))) {
      return attempt(() => runner.eval(script.lua, keys, args)).then((reply) => {
        if (id !== undefined) loaded.add(id)
        return reply
      })
    }
    return attempt(() => runner.evalSha(script.sha1, keys, args)).catch((error: unknown) => {
      // NOTE: NOSCRIPT is the only failure retried: the node did not run the script (restarted, promoted, new, or
      // flushed), and EVAL loads it there. After any other failure, a timeout above all, the script may have run.
      if (!isNoScript(error)) throw error
      if (id !== undefined) loaded.delete(id)
      return runner.eval(script.lua, keys, args).then((reply) => {
        if (id !== undefined) loaded.add(id)
        return reply
      })
    })
  }
}

/** A call of a client that may throw instead of rejecting: a rejected promise either way. */
function attempt(send: () => Promise<unknown>): Promise<unknown> {
  try {
    return Promise.resolve(send())
  } catch (error) {
    return Promise.reject(error)
  }
}
