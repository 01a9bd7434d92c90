import { isNoScript, type RedisScriptRunner } from './clients/index.js'
import { clusterSlot } from './cluster-slot.js'
import type { Script } from './script.js'

/**
 * Which scripts each node of one client holds, or is sent ahead of the call being made, so that calls keep their
 * order and a cold node costs one EVAL per script. Several calls may be in flight to a node
 * at once; if one of them were answered NOSCRIPT and sent again as EVAL, a later call with a script the node does
 * hold (the same rule set's grouped script, say) would run before it, out of order. So the first call of a script
 * to a node goes by EVAL (which loads it there), and every later one by EVALSHA: the node answers one connection's
 * calls in order, so the EVAL has loaded the script by the time they run. (Sending every call by EVAL until the node
 * had answered one sent, right after connecting, a flood's whole script once per hash slot, and the time to write
 * it counted against the calls already sent.) When a
 * node loses its scripts (restart, failover, SCRIPT FLUSH), or an EVAL fails before loading its script, EVALSHA
 * is answered NOSCRIPT and sent again as EVAL, in the order those answers come. A Cluster client without `nodeOf`
 * cannot say which node a call goes to: its calls go by EVALSHA first, one flight per slot at a time (`tracked`
 * is false).
 */
export class LoadedScripts {
  readonly #runner: RedisScriptRunner
  /** `node \n sha1` of the scripts sent to each node by EVAL. Bounded by rule sets × nodes. */
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
      // Recorded as it is sent: the calls after it on this node's connection find the script loaded.
      if (id !== undefined) loaded.add(id)
      return attempt(() => runner.eval(script.lua, keys, args)).catch((error: unknown) => {
        // The script may not have been loaded (a refused or redirected call): the next call loads it again.
        if (id !== undefined) loaded.delete(id)
        throw error
      })
    }
    return attempt(() => runner.evalSha(script.sha1, keys, args)).catch((error: unknown) => {
      // NOTE: NOSCRIPT is the only failure retried: the node did not run the script (restarted, promoted, new, or
      // flushed), and EVAL loads it there. After any other failure, a timeout above all, the script may have run.
      if (!isNoScript(error)) throw error
      if (id !== undefined) loaded.add(id)
      return runner.eval(script.lua, keys, args)
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
