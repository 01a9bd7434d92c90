/**
 * A SCAN run by a script on every server of a RedisStore, one step per call, whatever the client. On one server
 * the cursor is `0-<SCAN cursor>`. On a Cluster, each master in turn, in the order of their node ids, the cursor
 * `<node id>-<SCAN cursor>`: the master its SCAN cursor walks, named by what stays while slots move (a
 * master's place in a list of addresses moved with the list). A script goes to a master by a key of a slot it
 * serves, and checks on arrival that it runs there (`onMaster`). Used by `listOverrides` and `scanStored`.
 */
import { invalid, RateLimitError } from '../../support/errors.js'
import type { RedisScriptRunner } from './clients/index.js'
import { clusterSlot } from './cluster-slot.js'
import type { LoadedScripts } from './loaded-scripts.js'
import type { Script } from './script.js'
import { scriptOf } from './script.js'

/** What a step that reached another node than its master answers (`onMaster`). */
const ELSEWHERE = 'elsewhere'

/** How many times a step is sent, by a key of another slot each time, before it gives up on reaching its master. */
const ATTEMPTS = 8

/** A master of the Cluster: its node id, and the slot ranges it serves (from, to). */
interface Master {
  id: string
  ranges: [number, number][]
}

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
  if (!runner.cluster) {
    const reply = (await scripts.run(script, [], args(serverCursor(cursor)))) as unknown[]
    const next = String(reply[0])
    return { reply, cursor: next === '0' ? undefined : `0-${next}` }
  }
  const at = clusterCursor(cursor)
  const checked = onMaster(script)
  for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
    // Read at each attempt: a step sent elsewhere went by a slot that has moved, or is moving.
    const masters = await mastersOf(scripts)
    const place = placeOf(masters, at)
    if (place === undefined) return { reply: ['0'], cursor: undefined }
    const { master, scan } = place
    const key = keyOn(master, attempt)
    if (key === undefined) break
    const reply = await scripts.run(checked, [key], [...args(scan), master.id])
    if (!Array.isArray(reply)) continue
    const next = String(reply[0])
    if (next !== '0') return { reply, cursor: `${master.id}-${next}` }
    const after = masters.find((other) => other.id > master.id)
    return { reply, cursor: after === undefined ? undefined : `${after.id}-0` }
  }
  throw new RateLimitError(
    'ERR_RATEWINDOW_STORE',
    `A scan step could not reach the Cluster master${at === undefined ? '' : ` ${at.id}`}: it was redirected to another node ${ATTEMPTS} times, each by a key of another of its slots (slots moving, or the Cluster's view of them changing). Nothing was skipped; ask for the same page again.`,
  )
}

/** The SCAN cursor of a cursor on one server. */
function serverCursor(cursor: string | undefined): string {
  if (cursor === undefined) return '0'
  const match = /^0-(\d+)$/.exec(cursor)
  if (match === null) throw badCursor(cursor)
  return match[1]!
}

/** The master and the SCAN cursor of a Cluster cursor; undefined for the first step. */
function clusterCursor(cursor: string | undefined): { id: string; scan: string } | undefined {
  if (cursor === undefined) return undefined
  const match = /^([0-9a-f]{40})-(\d+)$/.exec(cursor)
  if (match === null) throw badCursor(cursor)
  return { id: match[1]!, scan: match[2]! }
}

function badCursor(cursor: string): RateLimitError {
  return invalid(
    'ERR_RATEWINDOW_INVALID_OPTION',
    'cursor',
    cursor,
    'a cursor a page of `list` returned (a listing started on another version starts again)',
  )
}

/**
 * The master a step runs on, and its SCAN cursor: the cursor's master, or, when it serves no slot any more (its
 * slots all moved, or it failed over), the next one by id from the start; undefined when none is left.
 */
function placeOf(
  masters: readonly Master[],
  at: { id: string; scan: string } | undefined,
): { master: Master; scan: string } | undefined {
  if (at === undefined) return masters[0] && { master: masters[0], scan: '0' }
  const same = masters.find((master) => master.id === at.id)
  if (same !== undefined) return { master: same, scan: at.scan }
  const after = masters.find((master) => master.id > at.id)
  return after && { master: after, scan: '0' }
}

/** The most hash tags tried for a key of one master (each slot is hit by about 60 of them). */
const TAGS_TRIED = 1_000_000

/**
 * A key a step goes to `master` by at its `attempt`: the attempt-th `{n}` (n = 0, 1, …) of a slot it serves. The
 * slots so found lie anywhere in its ranges (a reshard starts at their ends) and differ from one attempt to the
 * next; undefined past `TAGS_TRIED` (never, with slots).
 */
function keyOn(master: Master, attempt: number): string | undefined {
  let found = -1
  for (let n = 0; n < TAGS_TRIED; n++) {
    const slot = clusterSlot(`{${n}}`)
    if (master.ranges.some(([from, to]) => slot >= from && slot <= to) && ++found === attempt) return `{${n}}`
  }
  return undefined
}

/** The masters of the Cluster as the server tells them (`CLUSTER SLOTS`, from a script: every client can send it). */
async function mastersOf(scripts: LoadedScripts): Promise<Master[]> {
  // Any node answers, wherever the key goes.
  const ranges = (await scripts.run(CLUSTER_SLOTS_SCRIPT, ['{0}'], [])) as unknown[]
  const masters = new Map<string, Master>()
  for (let i = 0; i + 2 < ranges.length; i += 3) {
    const id = String(ranges[i + 2])
    let master = masters.get(id)
    if (master === undefined) {
      master = { id, ranges: [] }
      masters.set(id, master)
    }
    master.ranges.push([Number(ranges[i]), Number(ranges[i + 1])])
  }
  return [...masters.values()].sort((a, b) => (a.id < b.id ? -1 : 1))
}

/** The Cluster's slot ranges: { from, to, master's node id } per range. */
export const CLUSTER_SLOTS_SCRIPT = scriptOf(`local out = {}
for _, range in ipairs(redis.call('CLUSTER', 'SLOTS')) do
  out[#out + 1] = range[1]
  out[#out + 1] = range[2]
  out[#out + 1] = range[3][3]
end
return out
`)

const CHECKED = new Map<string, Script>()

/**
 * `script` run on a Cluster master: its last ARGV is the master's node id, and on any other node it scans nothing and
 * answers 'elsewhere'. NOTE: a step goes by a key, and a key can be redirected (ASK while its slot migrates, MOVED
 * after) to a master whose keyspace the step's SCAN cursor does not walk: without this check, it listed the other
 * master's keys from there, missing and repeating records of slots that never moved.
 */
export function onMaster(script: Script): Script {
  let checked = CHECKED.get(script.sha1)
  if (checked === undefined) {
    checked = scriptOf(
      `if redis.call('CLUSTER', 'MYID') ~= ARGV[#ARGV] then return '${ELSEWHERE}' end\n${script.lua}`,
    )
    CHECKED.set(script.sha1, checked)
  }
  return checked
}
