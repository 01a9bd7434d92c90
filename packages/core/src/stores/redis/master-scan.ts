/**
 * A SCAN run by a script on every server of a RedisStore, one step per call, whatever the client: on a Cluster,
 * each master in turn, the cursor `<master>-<SCAN cursor>` (masters in the order of their addresses, read with
 * each step); a script goes to a master by a key of a slot it serves. Used by `listOverrides` and `scanStored`.
 */
import { invalid } from '../../support/errors.js'
import type { RedisScriptRunner } from './clients/index.js'
import { CLUSTER_SLOTS, clusterSlot } from './cluster-slot.js'
import type { LoadedScripts } from './loaded-scripts.js'
import type { Script } from './script.js'
import { scriptOf } from './script.js'

/**
 * One step of `script` (whose ARGV `args` makes from the server's SCAN cursor, and whose reply starts with the next
 * SCAN cursor) on the server the combined `cursor` names; the reply, and the combined cursor of the next step
 * (undefined once every server is done).
 */
export async function scanStep(
  runner: RedisScriptRunner,
  scripts: LoadedScripts,
  script: Script,
  cursor: string | undefined,
  args: (scan: string) => string[],
): Promise<{ reply: unknown[]; cursor: string | undefined }> {
  const masters = runner.cluster ? await mastersOf(scripts) : ['']
  const [at, scan] = parseCursor(cursor, masters.length)
  const reply = (await scripts.run(script, runner.cluster ? [masters[at]!] : [], args(scan))) as unknown[]
  const next = String(reply[0])
  if (next !== '0') return { reply, cursor: `${at}-${next}` }
  return { reply, cursor: at + 1 < masters.length ? `${at + 1}-0` : undefined }
}

function parseCursor(cursor: string | undefined, masters: number): [number, string] {
  if (cursor === undefined) return [0, '0']
  const match = /^(\d+)-(\d+)$/.exec(cursor)
  if (match === null || Number(match[1]) >= masters) {
    throw invalid('ERR_RATEWINDOW_INVALID_OPTION', 'cursor', cursor, 'a cursor a page of `list` returned')
  }
  return [Number(match[1]), match[2]!]
}

/**
 * The masters of the Cluster as the server tells them (`CLUSTER SLOTS`, from a script: every client can send
 * it), in the order of their addresses: for each, a key of the first slot it serves, which routes a script there.
 */
async function mastersOf(scripts: LoadedScripts): Promise<string[]> {
  const ranges = (await scripts.run(CLUSTER_SLOTS_SCRIPT, [keyOfSlot(0)], [])) as unknown[]
  const firstSlot = new Map<string, number>()
  for (let i = 0; i + 2 < ranges.length; i += 3) {
    const node = String(ranges[i + 2])
    const from = Number(ranges[i])
    if (from < (firstSlot.get(node) ?? CLUSTER_SLOTS)) firstSlot.set(node, from)
  }
  return [...firstSlot.keys()].sort().map((node) => keyOfSlot(firstSlot.get(node)!))
}

/** The Cluster's slot ranges: { from, to, master's host:port } per range. */
export const CLUSTER_SLOTS_SCRIPT = scriptOf(`local out = {}
for _, range in ipairs(redis.call('CLUSTER', 'SLOTS')) do
  out[#out + 1] = range[1]
  out[#out + 1] = range[2]
  out[#out + 1] = tostring(range[3][1]) .. ':' .. tostring(range[3][2])
end
return out
`)

/** Hash tags found per slot. */
const SLOT_KEYS = new Map<number, string>()

/** A key in `slot`: `{<n>}` for the first n that hashes there. */
function keyOfSlot(slot: number): string {
  let key = SLOT_KEYS.get(slot)
  for (let n = 0; key === undefined; n++) if (clusterSlot(`{${n}}`) === slot) key = `{${n}}`
  SLOT_KEYS.set(slot, key)
  return key
}
