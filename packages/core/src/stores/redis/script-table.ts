/**
 * The table of the Lua scripts RedisStore sends, by name, each with its SHA1 (the identity EVALSHA runs it by): the
 * lease scripts, and for each algorithm alone its decision script and the batch script around it, without and with
 * a penalty (a rule set's script joins its algorithms' parts in rule order, so a change to any part changes one
 * of these). test/stores/script-table.test.ts pins every hash: a change to a script shows in review as a changed
 * hash. The decision and batch entries are the scripts the store runs (`scriptFor` and `batchScriptFor` build each
 * once); the lease entries are the scripts lease-script.ts hashes for RedisStore. SyncedStore's script (stores/synced/script.ts, a layer
 * above) is pinned by the same test.
 *
 * Replies (integers only; each script's own comment details its KEYS and ARGV):
 *
 * | script        | reply                                                                                           |
 * | ------------- | ----------------------------------------------------------------------------------------------- |
 * | decision      | one record: { first, now, per rule: remaining, reset, retryAfter, then repaired, then with a   |
 * |               | penalty blocked, then with overrides the record's JSON or '', then with a plan the plan's JSON  |
 * |               | or '' }; a refund's is { 1, now, repaired[, record] } (script.ts, override-lua.ts, plan-lua.ts) |
 * | decision batch| D records in call order, each preceded by its length: { length, ...record } × D (batch-script.ts) |
 * | lease         | { allowed, in flight, ms until the earliest lease expires } (lease-script.ts)                   |
 * | lease batch   | D lease records of 3, one after another                                                         |
 * | override set  | the record's JSON as it stands after the change, '' when nothing is left (override-scripts.ts)  |
 * | override read | the record's JSON, ended parts dropped, or '' (override-scripts.ts)                             |
 * | override list | { next SCAN cursor, then the JSON of each live record of the step } (override-scripts.ts)       |
 * | cluster slots | { from, to, master node id } per slot range (master-scan.ts, each Cluster scan step)            |
 * | … on a master | a scan step's reply, or 'elsewhere' from another node (master-scan.ts `onMaster`)               |
 * | time          | the server's TIME in epoch ms (overrides.ts, `give` without a store clock)                      |
 *
 * The record's and the plan's JSON are the only strings a decision returns: the exceptions to "integers only".
 *
 * The store reads a group's reply once: each call's promise resolves with the value decoded from its record
 * (`Prepared.decode`: `decodeDecision` in reply.ts for decisions), and no array is built per call. A change of format changes the script's
 * SHA1, so during a rolling deploy each process runs its own version of a script by its own hash and reads its own
 * replies; what the scripts keep in Redis (the state of each key) is another matter: a change to it must ship with
 * a test that the new script reads the old one's state.
 */
import { ALGORITHMS_BY_CODE } from '../../algorithms/index.js'
import { batchScriptFor } from './batch-script.js'
import { LEASE_BATCH_SCRIPT, LEASE_SCRIPT } from './lease-script.js'
import { CLUSTER_SLOTS_SCRIPT, onMaster } from './master-scan.js'
import { LIST_OVERRIDES_SCRIPT, READ_OVERRIDE_SCRIPT, UPDATE_OVERRIDE_SCRIPT } from './override-scripts.js'
import { TIME_SCRIPT } from './overrides.js'
import { type Script, scriptFor } from './script.js'
import { SCAN_STORED_SCRIPT } from './stored-keys.js'

/**
 * @internal Every script of the table, by name: `lease`, `lease batch`,
 * `<algorithm>[ + penalty][ + overrides[ + plan]][ batch]`,
 * and the override scripts.
 */
export function redisScripts(): Readonly<Record<string, Script>> {
  const table: Record<string, Script> = {
    lease: LEASE_SCRIPT,
    'lease batch': LEASE_BATCH_SCRIPT,
  }
  for (const algorithm of ALGORITHMS_BY_CODE.values()) {
    for (const penalty of [false, true]) {
      const name = penalty ? `${algorithm.name} + penalty` : algorithm.name
      table[name] = scriptFor([algorithm.code], penalty)
      table[`${name} batch`] = batchScriptFor([algorithm.code], penalty)
      table[`${name} + overrides`] = scriptFor([algorithm.code], penalty, true)
      table[`${name} + overrides batch`] = batchScriptFor([algorithm.code], penalty, true)
      table[`${name} + overrides + plan`] = scriptFor([algorithm.code], penalty, true, true)
      table[`${name} + overrides + plan batch`] = batchScriptFor([algorithm.code], penalty, true, true)
    }
  }
  table['override set'] = UPDATE_OVERRIDE_SCRIPT
  table['override read'] = READ_OVERRIDE_SCRIPT
  table['override list'] = LIST_OVERRIDES_SCRIPT
  table['override list on a master'] = onMaster(LIST_OVERRIDES_SCRIPT)
  table['cluster slots'] = CLUSTER_SLOTS_SCRIPT
  table['stored scan'] = SCAN_STORED_SCRIPT
  table['stored scan on a master'] = onMaster(SCAN_STORED_SCRIPT)
  table.time = TIME_SCRIPT
  return Object.freeze(table)
}
