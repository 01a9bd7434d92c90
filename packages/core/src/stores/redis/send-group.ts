import type { Penalty } from '../../algorithms/penalty.js'
import { RateLimitError } from '../../support/errors.js'
import { batchArguments, batchReplies } from './batch-script.js'
import type { RedisScriptRunner } from './clients/index.js'
import type { Entry } from './groups.js'
import { LEASE_BATCH_SCRIPT, LEASE_SCRIPT } from './lease-script.js'
import type { LoadedScripts } from './loaded-scripts.js'
import type { Script } from './script.js'

/**
 * What the store sends for one rule set, rendered once: its script, the keys' suffixes, and the arguments after
 * the mode, now and cost (the rules' parameters, then the penalty's).
 */
export interface Prepared {
  script: Script
  /** The same decisions for a group of calls (batch-script.ts). */
  batch: Script
  /**
   * What calls must share to go in one batch: the script and its shared arguments (the rules' parameters and
   * the penalty's), which a batch sends once. Two limiters with the same algorithms but other limits differ.
   */
  batchKey: string
  suffixes: string[]
  args: string[]
  penalty: Penalty | undefined
}

/** What lease calls send: they group like decisions, apart from them (their own batch script). */
export const LEASE_PREPARED: Prepared = {
  script: LEASE_SCRIPT,
  batch: LEASE_BATCH_SCRIPT,
  batchKey: 'lease',
  suffixes: [],
  args: [],
  penalty: undefined,
}

/** One script call waiting for its group: the single-call script's keys and arguments. */
export interface ScriptCall {
  readonly prepared: Prepared
  readonly keys: string[]
  readonly args: string[]
}

/**
 * Sends one group of calls (one script and slot) and answers each call's reply. One call goes as the
 * single-decision script, exactly as without grouping.
 */
export function sendGroup(
  runner: RedisScriptRunner,
  scripts: LoadedScripts,
  entries: readonly Entry<ScriptCall, number[]>[],
): Promise<number[][]> {
  const runScript = (script: Script, keys: readonly string[], args: readonly string[]) =>
    scripts.run(script, keys, args)
  if (entries.length === 1) {
    const { prepared, keys, args } = entries[0]!.payload
    return runScript(prepared.script, keys, args).then((reply) => [checkReply(runner, reply)])
  }
  const { prepared } = entries[0]!.payload
  if (prepared === LEASE_PREPARED) {
    const keys: string[] = []
    const args: string[] = []
    for (const entry of entries) {
      keys.push(entry.payload.keys[0]!)
      for (const arg of entry.payload.args) args.push(arg)
    }
    return runScript(prepared.batch, keys, args).then((reply) => {
      const numbers = checkReply(runner, reply)
      return entries.map((_, i) => numbers.slice(3 * i, 3 * i + 3))
    })
  }
  const { keys, args } = batchArguments(
    entries.map((entry) => entry.payload),
    prepared.args.length,
  )
  return runScript(prepared.batch, keys, args).then((reply) => {
    if (!Array.isArray(reply)) checkReply(runner, reply)
    const replies = batchReplies(reply as unknown[], entries.length)
    for (const each of replies) checkReply(runner, each)
    return replies
  })
}

/** A script's reply as numbers, or a store error naming the client family when it is not a list. */
function checkReply(runner: RedisScriptRunner, reply: unknown): number[] {
  if (!Array.isArray(reply) || reply.length < 2) {
    throw new RateLimitError(
      'ERR_RATEWINDOW_STORE',
      `Unexpected reply from the rate limit script (${runner.family}): ${String(reply)}`,
    )
  }
  return reply.map(Number)
}
