/**
 * The table of the Lua scripts RedisStore sends, by name, each with its SHA1 (the identity EVALSHA runs it by): the
 * lease scripts, and for each algorithm alone its decision script and the batch script around it, without and with
 * a penalty (a rule set's script joins its algorithms' parts in rule order, so a change to any part changes one
 * of these). test/stores/script-table.test.ts pins every hash: a change to a script shows in review as a changed
 * hash. The decision and batch entries are the scripts the store runs (`scriptFor` and `batchScriptFor` build each
 * once); the lease entries are the scripts lease-script.ts hashes for RedisStore. SyncedStore's script (stores/synced/script.ts, a layer
 * above) is pinned by the same test.
 */
import { ALGORITHMS } from '../../algorithms/index.js'
import { batchScriptFor } from './batch-script.js'
import { LEASE_BATCH_SCRIPT, LEASE_SCRIPT } from './lease-script.js'
import { type Script, scriptFor } from './script.js'

/** @internal Every script of the table, by name: `lease`, `lease batch`, `<algorithm>[ + penalty][ batch]`. */
export function redisScripts(): Readonly<Record<string, Script>> {
  const table: Record<string, Script> = {
    lease: LEASE_SCRIPT,
    'lease batch': LEASE_BATCH_SCRIPT,
  }
  for (const algorithm of Object.values(ALGORITHMS)) {
    for (const penalty of [false, true]) {
      const name = penalty ? `${algorithm.name} + penalty` : algorithm.name
      table[name] = scriptFor([algorithm.code], penalty)
      table[`${name} batch`] = batchScriptFor([algorithm.code], penalty)
    }
  }
  return Object.freeze(table)
}
