/**
 * The commands on one key: `inspect`, `reset`, `block`, `unblock`, `overrides set|get|delete|list`. With `--config`
 * each goes through the limiter's own API (`RateLimiter.reset`, `limiter.overrides.*`); `inspect` without a config
 * reads the key's state where its namespaces spell their rules (`inspectStored`).
 */
import type {
  Duration,
  Inspection,
  LimitOverride,
  ManualBlock,
  OverrideRecord,
  RateLimiter,
} from '@ratewindow/core'
import { decodeNamespace, decodeStoredKey, inspectStored, storedHash } from '@ratewindow/core/stored'
import type { Command, GlobalOptions } from '../args.js'
import { keyFor, selectLimiters } from '../config.js'
import { CliError, notFound, usage } from '../errors.js'
import { type Connection, keysOfHash } from '../redis.js'
import { duration, type Output, printable, progressLine, table } from '../render.js'

/** `inspect --json`: the key, its hash, and where it stands in each limiter. */
export interface InspectJson {
  key: string
  hash: string
  limiters: ({ limiter: string; namespace: string } & Inspection)[]
}

/**
 * The address given on the command line, where the limiter is keyed by the client's IP and `key` is the key the
 * HTTP engine makes of it (an IPv6 subnet such as `2001:db8:abcd::/56`); absent when the key is as given.
 */
export interface GivenKey {
  given?: string
}

/** `block --json`: the block placed. */
export type BlockJson = ManualBlock & { key: string; limiter: string } & GivenKey
/** `overrides get|set --json`. */
export interface OverrideJson extends GivenKey {
  key: string
  limiter: string
  override: LimitOverride
}
/** `overrides list --json`: a page, and the cursor of the next (null at the end). */
export interface OverrideListJson {
  limiter: string
  records: OverrideRecord[]
  cursor: string | null
}
/** `reset`, `unblock`, `overrides delete --json`. */
export interface OkJson extends GivenKey {
  ok: true
}

export async function inspect(
  connection: Connection,
  options: GlobalOptions,
  configured: readonly RateLimiter[] | undefined,
  command: { key: string; hash: boolean },
  output: Output,
): Promise<InspectJson> {
  const { key } = command
  const hash = command.hash ? key : storedHash(key)
  const result: InspectJson = { key, hash, limiters: [] }
  if (configured !== undefined) {
    for (const limiter of selectLimiters(configured, options.limiter, true)) {
      result.limiters.push({
        limiter: limiter.name,
        namespace: limiter.namespace,
        ...(command.hash
          ? await inspectHash(connection, limiter, hash)
          : await inspectKey(limiter, key, output)),
      })
    }
  } else {
    const namespaces = new Set<string>()
    for (const found of await keysOfHash(connection.client, options.prefix, hash)) {
      const stored = decodeStoredKey(found, options.prefix)
      if (stored?.part.kind === 'rule') namespaces.add(stored.namespace)
    }
    /** Namespaces that hold the key but do not spell their rules (a quota's, a group's): a config reads them. */
    const unread: string[] = []
    for (const namespace of [...namespaces].sort()) {
      if (options.limiter !== undefined && namespace !== options.limiter) continue
      const rules = decodeNamespace(namespace)?.rules
      if (rules === undefined) {
        unread.push(namespace)
        output.note(`${printable(namespace)}: its rules are not in its name; pass --config to read it.\n`)
        continue
      }
      const inspection = await inspectStored(connection.store, { namespace, hash, rules, key })
      result.limiters.push({ limiter: namespace, namespace, ...inspection })
    }
    if (result.limiters.length === 0 && unread.length > 0)
      throw usage(
        `${JSON.stringify(key)} has state in ${unread.map(printable).join(', ')}, whose rules are not in its name: pass --config (the application's limiters) to read it.`,
      )
    if (result.limiters.length === 0)
      throw notFound(
        `No state for ${JSON.stringify(key)} under prefix ${JSON.stringify(options.prefix)}${options.limiter === undefined ? '' : ` in ${options.limiter}`}.`,
      )
  }
  if (!options.json) output.print(inspectText(result))
  // Exit code 3 when Redis holds nothing for the key, with --config or without: with it, the full quota is shown
  // first (the one document `--json` prints).
  if (result.limiters.every(holdsNothing)) {
    if (options.json) output.print(JSON.stringify(result, null, 2))
    throw new CliError(
      'ERR_RATEWINDOW_NOT_FOUND',
      `No state for ${JSON.stringify(key)} in ${result.limiters.map((each) => each.limiter).join(', ')}: nothing counted, no override, no block.`,
      { printed: true },
    )
  }
  return result
}

/** `inspect KEY` in a configured limiter: its own `inspect`, of the key it receives for KEY. */
async function inspectKey(limiter: RateLimiter, given: string, output: Output): Promise<Inspection> {
  const { key, warning } = keyFor(limiter, given)
  if (warning !== undefined) output.note(`ratewindow: ${printable(warning)}\n`)
  return limiter.overrides.inspect(key)
}

/** `inspect --hash HASH` in a configured limiter: the key known by its hash, read as the limiter would decide. */
function inspectHash(connection: Connection, limiter: RateLimiter, hash: string): Promise<Inspection> {
  const scope = limiter.overrides.scope
  return inspectStored(connection.store, {
    namespace: limiter.namespace,
    hash,
    rules: limiter.overrides.rules,
    ...(scope !== undefined && { overrides: scope }),
    ...(limiter.operator.plans !== undefined && { plans: limiter.operator.plans }),
  })
}

/** Whether an inspection found nothing stored: no unit used, no override, no block. */
const holdsNothing = (inspection: Inspection): boolean =>
  inspection.rules.every((rule) => rule.used === 0) &&
  inspection.override === undefined &&
  inspection.block === undefined &&
  inspection.penaltyBlock === undefined

function inspectText(result: InspectJson): string {
  const blocks = result.limiters.map((each) => {
    const given = each.key === result.key
    const lines = [
      printable(
        given
          ? `${each.limiter}  (key ${result.key}, hash ${result.hash})`
          : `${each.limiter}  (key ${each.key}, for the address ${result.key})`,
      ),
    ]
    // A quota's period end, where the limiter has one.
    const periods = each.rules.some((rule) => rule.periodEnd !== undefined)
    lines.push(
      table(
        [
          'RULE',
          'ALGORITHM',
          'LIMIT',
          'USED',
          'REMAINING',
          'NEXT FREE',
          'RESET',
          ...(periods ? ['PERIOD ENDS'] : []),
        ],
        each.rules.map((rule) => [
          rule.name,
          rule.algorithm,
          rule.overridden ? `${rule.limit}*` : String(rule.limit),
          rule.used,
          rule.remaining,
          duration(rule.nextFree),
          duration(rule.reset),
          ...(periods ? [rule.periodEnd === undefined ? '-' : new Date(rule.periodEnd).toISOString()] : []),
        ]),
      ),
    )
    if (each.plan !== undefined) lines.push(printable(`plan: ${each.plan}`))
    if (each.override !== undefined)
      lines.push(printable(`override: ${JSON.stringify(each.override)}  (* overridden)`))
    if (each.block !== undefined)
      lines.push(
        printable(
          `blocked by an operator for ${duration(each.block.until - each.at)}${each.block.reason ? `: ${each.block.reason}` : ''}`,
        ),
      )
    if (each.penaltyBlock !== undefined)
      lines.push(`blocked by the penalty for ${duration(each.penaltyBlock)}`)
    return lines.join('\n')
  })
  return blocks.join('\n\n')
}

/** The config's limiter the command acts on: `--limiter`, or the only one. */
function actingLimiter(
  configured: readonly RateLimiter[] | undefined,
  options: GlobalOptions,
  command: string,
): RateLimiter {
  if (configured === undefined)
    throw usage(
      `\`${command}\` acts through the application's limiter: pass \`--config <module>\` (see \`ratewindow --help\`).`,
    )
  return selectLimiters(configured, options.limiter, false)[0]!
}

type KeyCommand = Extract<Command, { key: string }> | Extract<Command, { name: 'overrides list' }>

/** `reset`, `block`, `unblock`, `overrides …`: one call of the limiter's API. */
export async function act(
  command: KeyCommand,
  options: GlobalOptions,
  configured: readonly RateLimiter[] | undefined,
  output: Output,
): Promise<OkJson | BlockJson | OverrideJson | OverrideListJson> {
  const limiter = actingLimiter(configured, options, command.name)
  const say = (text: string) => options.json || output.print(printable(text))
  if (command.name === 'overrides list') return list(limiter, command.cursor, options, output)
  const { key, note, warning } = keyFor(limiter, command.key)
  if (note !== undefined) say(note)
  if (warning !== undefined) output.note(`ratewindow: ${printable(warning)}\n`)
  const given = note === undefined ? {} : { given: command.key }
  switch (command.name) {
    case 'reset':
      await limiter.reset(key)
      say(`reset ${key} in ${limiter.name}`)
      return { ok: true, ...given }
    case 'unblock':
      await limiter.overrides.unblock(key)
      say(`unblocked ${key} in ${limiter.name}`)
      return { ok: true, ...given }
    case 'block': {
      const block = await limiter.overrides.block(key, {
        for: command.for as Duration,
        ...(command.reason !== undefined && { reason: command.reason }),
      })
      say(`blocked ${key} in ${limiter.name} until ${new Date(block.until).toISOString()}`)
      return { key, ...given, limiter: limiter.name, ...block }
    }
    case 'overrides set': {
      await limiter.overrides.set(
        key,
        command.override as LimitOverride,
        command.ttl === undefined ? {} : { ttl: command.ttl as Duration },
      )
      return { ...(await overrideOf(limiter, key, say)), ...given }
    }
    case 'overrides get':
      return { ...(await overrideOf(limiter, key, say)), ...given }
    case 'overrides delete':
      // Deleting nothing is "not found" (exit 3), as `get` says: the key may be mistyped.
      await overrideOf(limiter, key, () => undefined)
      await limiter.overrides.delete(key)
      say(`deleted the override of ${key} in ${limiter.name}`)
      return { ok: true, ...given }
    default:
      throw usage(`\`${command.name}\` is not an action.`)
  }
}

async function overrideOf(
  limiter: RateLimiter,
  key: string,
  say: (text: string) => unknown,
): Promise<OverrideJson> {
  const override = await limiter.overrides.get(key)
  if (override === undefined) throw notFound(`${JSON.stringify(key)} has no override in ${limiter.name}.`)
  say(`${key} in ${limiter.name}: ${JSON.stringify(override)}`)
  return { key, limiter: limiter.name, override }
}

/** `overrides list`'s default page: records, not SCAN steps. */
const LIST_PAGE = 100

/**
 * `overrides list`: a page of up to `--count` records (100), read by following the store's cursor page after page
 * (one SCAN step each, on one master of a Cluster) until they are found or the scan ends, so that sparse records
 * on a large keyspace still fill a page; the cursor returned continues from there. A progress line on a terminal.
 */
async function list(
  limiter: RateLimiter,
  from: string | undefined,
  options: GlobalOptions,
  output: Output,
): Promise<OverrideListJson> {
  const wanted = options.count ?? LIST_PAGE
  const progress = progressLine(output, 'reading override records: SCAN steps')
  const records: OverrideRecord[] = []
  let cursor = from
  let steps = 0
  do {
    const page = await limiter.overrides.list({
      ...(cursor !== undefined && { cursor }),
      count: wanted - records.length,
    })
    records.push(...page.records)
    cursor = page.cursor
    progress.update(++steps)
  } while (records.length < wanted && cursor !== undefined)
  progress.done()
  // The table's cells are made printable one by one: the lines between its rows stay lines.
  if (!options.json) output.print(listText(records, cursor))
  return { limiter: limiter.name, records, cursor: cursor ?? null }
}

function listText(records: readonly OverrideRecord[], cursor: string | undefined): string {
  const rows = records.map((record) => [
    record.key,
    record.limits === undefined ? '-' : JSON.stringify(record.limits),
    record.block === undefined
      ? '-'
      : `until ${new Date(record.block.until).toISOString()}${record.block.reason ? ` (${record.block.reason})` : ''}`,
  ])
  const next = cursor === undefined ? '' : `\n\nmore: --cursor ${printable(cursor)}`
  return `${table(['KEY', 'OVERRIDE', 'BLOCK'], rows)}${next}`
}
