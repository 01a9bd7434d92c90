/**
 * The commands on one key: `inspect`, `reset`, `block`, `unblock`, `overrides set|get|delete|list`. With `--config`
 * each goes through the limiter's own API (`RateLimiter.reset`, `limiter.overrides.*`); `inspect` without a config
 * reads the key's state where its namespaces spell their rules (`inspectStored`).
 */
import {
  type Duration,
  decodeNamespace,
  decodeStoredKey,
  type Inspection,
  inspectStored,
  type LimitOverride,
  type ManualBlock,
  type OverrideRecord,
  type RateLimiter,
  storedHash,
} from '@ratewindow/core'
import type { Command, GlobalOptions } from '../args.js'
import { selectLimiters } from '../config.js'
import { notFound, usage } from '../errors.js'
import { type Connection, keysOfHash } from '../redis.js'
import { duration, type Output, table } from '../render.js'

/** `inspect --json`: the key, its hash, and where it stands in each limiter. */
export interface InspectJson {
  key: string
  hash: string
  limiters: ({ limiter: string; namespace: string } & Inspection)[]
}

/** `block --json`: the block placed. */
export type BlockJson = ManualBlock & { key: string; limiter: string }
/** `overrides get|set --json`. */
export interface OverrideJson {
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
export interface OkJson {
  ok: true
}

export async function inspect(
  connection: Connection,
  options: GlobalOptions,
  configured: readonly RateLimiter[] | undefined,
  key: string,
  output: Output,
): Promise<InspectJson> {
  const hash = storedHash(key)
  const result: InspectJson = { key, hash, limiters: [] }
  if (configured !== undefined) {
    for (const limiter of selectLimiters(configured, options.limiter, true)) {
      const inspection = await limiter.overrides.inspect(key)
      result.limiters.push({ limiter: limiter.name, namespace: limiter.namespace, ...inspection })
    }
  } else {
    const namespaces = new Set<string>()
    for (const found of await keysOfHash(connection.client, options.prefix, hash)) {
      const stored = decodeStoredKey(found, options.prefix)
      if (stored?.part.kind === 'rule') namespaces.add(stored.namespace)
    }
    for (const namespace of [...namespaces].sort()) {
      if (options.limiter !== undefined && namespace !== options.limiter) continue
      const rules = decodeNamespace(namespace)?.rules
      if (rules === undefined) {
        output.note(`${namespace}: its rules are not in its name; pass --config to read it.\n`)
        continue
      }
      const inspection = await inspectStored(connection.store, { namespace, hash, rules, key })
      result.limiters.push({ limiter: namespace, namespace, ...inspection })
    }
    if (result.limiters.length === 0)
      throw notFound(
        `No state for ${JSON.stringify(key)} under prefix ${JSON.stringify(options.prefix)}${options.limiter === undefined ? '' : ` in ${options.limiter}`}.`,
      )
  }
  if (!options.json) output.print(inspectText(result))
  return result
}

function inspectText(result: InspectJson): string {
  const blocks = result.limiters.map((each) => {
    const lines = [`${each.limiter}  (key ${result.key}, hash ${result.hash})`]
    lines.push(
      table(
        ['RULE', 'ALGORITHM', 'LIMIT', 'USED', 'REMAINING', 'NEXT FREE', 'RESET'],
        each.rules.map((rule) => [
          rule.name,
          rule.algorithm,
          rule.overridden ? `${rule.limit}*` : String(rule.limit),
          rule.used,
          rule.remaining,
          duration(rule.nextFree),
          duration(rule.reset),
        ]),
      ),
    )
    if (each.override !== undefined) lines.push(`override: ${JSON.stringify(each.override)}  (* overridden)`)
    if (each.block !== undefined)
      lines.push(
        `blocked by an operator for ${duration(each.block.until - each.at)}${each.block.reason ? `: ${each.block.reason}` : ''}`,
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
  const say = (text: string) => options.json || output.print(text)
  switch (command.name) {
    case 'reset':
      await limiter.reset(command.key)
      say(`reset ${command.key} in ${limiter.name}`)
      return { ok: true }
    case 'unblock':
      await limiter.overrides.unblock(command.key)
      say(`unblocked ${command.key} in ${limiter.name}`)
      return { ok: true }
    case 'block': {
      const block = await limiter.overrides.block(command.key, {
        for: command.for as Duration,
        ...(command.reason !== undefined && { reason: command.reason }),
      })
      say(`blocked ${command.key} in ${limiter.name} until ${new Date(block.until).toISOString()}`)
      return { key: command.key, limiter: limiter.name, ...block }
    }
    case 'overrides set': {
      await limiter.overrides.set(
        command.key,
        command.override as LimitOverride,
        command.ttl === undefined ? {} : { ttl: command.ttl as Duration },
      )
      return overrideOf(limiter, command.key, say)
    }
    case 'overrides get':
      return overrideOf(limiter, command.key, say)
    case 'overrides delete':
      await limiter.overrides.delete(command.key)
      say(`deleted the override of ${command.key} in ${limiter.name}`)
      return { ok: true }
    case 'overrides list': {
      const page = await limiter.overrides.list({
        ...(command.cursor !== undefined && { cursor: command.cursor }),
        ...(options.count !== undefined && { count: options.count }),
      })
      say(listText(page.records, page.cursor))
      return { limiter: limiter.name, records: page.records, cursor: page.cursor ?? null }
    }
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

function listText(records: readonly OverrideRecord[], cursor: string | undefined): string {
  const rows = records.map((record) => [
    record.key,
    record.limits === undefined ? '-' : JSON.stringify(record.limits),
    record.block === undefined
      ? '-'
      : `until ${new Date(record.block.until).toISOString()}${record.block.reason ? ` (${record.block.reason})` : ''}`,
  ])
  const next = cursor === undefined ? '' : `\n\nmore: --cursor ${cursor}`
  return `${table(['KEY', 'OVERRIDE', 'BLOCK'], rows)}${next}`
}
