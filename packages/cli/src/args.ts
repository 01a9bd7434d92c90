/** The command line read once into a `Command`: every option checked here, each error naming the option. */
import { parseArgs } from 'node:util'
import { usage } from './errors.js'

/** What every command shares. */
export interface GlobalOptions {
  /** `--redis` or `REDIS_URL`: a `redis://` or `rediss://` URL. */
  redis: string
  /** `--cluster`: connect as a Cluster client without asking the server. */
  cluster: boolean
  /** `--prefix`: the RedisStore's `prefix` option. */
  prefix: string
  /** `--limiter`: a limiter's name (from `--config`) or namespace. */
  limiter: string | undefined
  /** `--config`: the module exporting the application's limiters. */
  config: string | undefined
  /** `--config-timeout` or `RATEWINDOW_CONFIG_TIMEOUT` (seconds), in ms: the longest `--config` may take to load. */
  configTimeoutMs: number
  json: boolean
  /** `--scan`: the most keys a scan reads. */
  scan: number
  /** `--count`: rows (`top`, `watch`) or records per page (`overrides list`). */
  count: number | undefined
}

export type Command =
  | { name: 'help'; topic: string | undefined }
  | { name: 'version' }
  | { name: 'limiters' }
  | { name: 'top' }
  | { name: 'watch'; once: boolean; admin: string[]; adminToken: string | undefined }
  | { name: 'reset' | 'unblock'; key: string }
  /** `key` is a stored hash with `--hash`. */
  | { name: 'inspect'; key: string; hash: boolean }
  | { name: 'block'; key: string; for: string; reason: string | undefined }
  | { name: 'overrides set'; key: string; override: Record<string, unknown>; ttl: string | undefined }
  | { name: 'overrides get' | 'overrides delete'; key: string }
  | { name: 'overrides list'; cursor: string | undefined }

export const COMMANDS = [
  'limiters',
  'top',
  'watch',
  'inspect',
  'reset',
  'block',
  'unblock',
  'overrides',
] as const

const OPTIONS = {
  redis: { type: 'string' },
  cluster: { type: 'boolean' },
  prefix: { type: 'string' },
  limiter: { type: 'string' },
  config: { type: 'string' },
  'config-timeout': { type: 'string' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
  version: { type: 'boolean' },
  scan: { type: 'string' },
  count: { type: 'string' },
  once: { type: 'boolean' },
  admin: { type: 'string', multiple: true },
  'admin-token': { type: 'string' },
  for: { type: 'string' },
  reason: { type: 'string' },
  limit: { type: 'string' },
  burst: { type: 'string' },
  rule: { type: 'string', multiple: true },
  override: { type: 'string' },
  ttl: { type: 'string' },
  cursor: { type: 'string' },
  hash: { type: 'string' },
} as const

/** `--config-timeout`'s default (seconds): a config module that has not loaded by then waits for something. */
export const DEFAULT_CONFIG_TIMEOUT = 10

/** `--scan`'s default: enough for a screen of the most limited keys on a busy store, bounded. */
export const DEFAULT_SCAN = 100_000

type Env = Readonly<Record<string, string | undefined>>

/** Reads `argv` (without `node` and the script) into the command and the global options. */
export function parseCommandLine(
  argv: readonly string[],
  env: Env,
): { command: Command; options: GlobalOptions } {
  let parsed: ReturnType<typeof parseArgs<{ options: typeof OPTIONS; allowPositionals: true }>>
  try {
    parsed = parseArgs({ args: [...argv], options: OPTIONS, allowPositionals: true, strict: true })
  } catch (error) {
    // A key that starts with `-` reads as an option: it goes after `--`.
    const message = (error as Error).message.replace(
      /To specify a positional argument starting with a '-'.*$/s,
      'A key that starts with `-` goes last, after `--` (options before it): `ratewindow inspect --limiter api -- -42`.',
    )
    throw usage(`${message} See \`ratewindow --help\`.`)
  }
  const { values, positionals } = parsed
  const options: GlobalOptions = {
    redis: values.redis ?? (env.REDIS_URL || 'redis://127.0.0.1:6379'),
    cluster: values.cluster === true,
    prefix: values.prefix ?? '',
    limiter: values.limiter,
    config: values.config,
    configTimeoutMs: configTimeout(values['config-timeout'], env.RATEWINDOW_CONFIG_TIMEOUT),
    json: values.json === true,
    scan: count(values.scan, '--scan') ?? DEFAULT_SCAN,
    count: count(values.count, '--count'),
  }
  if (!/^rediss?:\/\//.test(options.redis)) {
    throw usage(`\`--redis\` must be a redis:// or rediss:// URL; received ${JSON.stringify(options.redis)}.`)
  }
  const [name, ...rest] = positionals
  if (values.version === true) return { command: done({ name: 'version' }, positionals), options }
  // A script that asks for JSON gets a JSON error, not the help text.
  if (name === undefined && options.json && values.help !== true)
    throw usage('A command is needed, e.g. `ratewindow limiters --json`. See `ratewindow --help`.')
  if (values.help === true || name === undefined || name === 'help') {
    return { command: { name: 'help', topic: name === 'help' ? rest[0] : name }, options }
  }
  return { command: commandOf(name, rest, values, env), options }
}

type Values = ReturnType<typeof parseArgs<{ options: typeof OPTIONS; allowPositionals: true }>>['values']

function commandOf(name: string, rest: string[], values: Values, env: Env): Command {
  switch (name) {
    case 'limiters':
    case 'top':
      return done({ name }, rest)
    case 'watch':
      return done(
        {
          name,
          once: values.once === true,
          admin: (values.admin ?? []).map(adminUrl),
          adminToken: values['admin-token'] ?? (env.RATEWINDOW_ADMIN_TOKEN || undefined),
        },
        rest,
      )
    case 'inspect':
      if (values.hash !== undefined) {
        if (!/^[\w-]{22}$/.test(values.hash))
          throw usage(
            `\`--hash\` takes a key's hash as \`top\` shows it (22 characters of A-Z a-z 0-9 _ -); received ${JSON.stringify(values.hash)}.`,
          )
        return done({ name, key: values.hash, hash: true }, rest)
      }
      return done({ name, key: keyOf(rest, name), hash: false }, rest.slice(1))
    case 'reset':
    case 'unblock':
      return done({ name, key: keyOf(rest, name) }, rest.slice(1))
    case 'block':
      if (values.for === undefined) throw usage('`block` needs `--for`, how long: e.g. `--for 1h`.')
      return done({ name, key: keyOf(rest, name), for: values.for, reason: values.reason }, rest.slice(1))
    case 'overrides':
    case 'override':
      return overridesCommand(rest, values)
    default:
      throw usage(`Unknown command ${JSON.stringify(name)}; the commands are ${COMMANDS.join(', ')}.`)
  }
}

function overridesCommand(rest: string[], values: Values): Command {
  const [action, ...more] = rest
  switch (action) {
    case 'set': {
      const key = keyOf(more, 'overrides set')
      return done(
        { name: 'overrides set', key, override: overrideOf(values), ttl: values.ttl },
        more.slice(1),
      )
    }
    case 'get':
    case 'delete':
      return done({ name: `overrides ${action}`, key: keyOf(more, `overrides ${action}`) }, more.slice(1))
    case 'list':
      return done({ name: 'overrides list', cursor: values.cursor }, more)
    default:
      throw usage(
        '`overrides` takes `set`, `get`, `delete` or `list`, e.g. `ratewindow overrides get customer:42`.',
      )
  }
}

/** The override of `overrides set`: `--override <json>`, or `--limit`/`--burst` and `--rule name=limit`. */
function overrideOf(values: Values): Record<string, unknown> {
  if (values.override !== undefined) {
    if (values.limit !== undefined || values.burst !== undefined || values.rule !== undefined)
      throw usage('`--override` takes the whole override: leave out `--limit`, `--burst` and `--rule`.')
    try {
      const override: unknown = JSON.parse(values.override)
      if (typeof override === 'object' && override !== null && !Array.isArray(override))
        return override as Record<string, unknown>
    } catch {}
    throw usage(`\`--override\` must be a JSON object such as '{"limit":1000}'; received ${values.override}.`)
  }
  const override: Record<string, unknown> = {}
  const limit = count(values.limit, '--limit')
  const burst = count(values.burst, '--burst')
  if (limit !== undefined) override.limit = limit
  if (burst !== undefined) override.burst = burst
  for (const entry of values.rule ?? []) {
    const match = /^([^=]+)=(\d+)$/.exec(entry)
    if (match === null)
      throw usage(`\`--rule\` takes name=limit, e.g. \`--rule per-minute=600\`; received ${entry}.`)
    // Without a prototype: a rule named `__proto__` is an entry, not the object's prototype.
    const rules = (override.rules ?? Object.create(null)) as Record<string, { limit: number }>
    rules[match[1]!] = { limit: Number(match[2]) }
    override.rules = rules
  }
  if (Object.keys(override).length === 0)
    throw usage('`overrides set` needs `--limit`, `--rule name=limit` or `--override <json>`.')
  return override
}

/**
 * An `--admin` value: the http(s) base URL of an admin endpoint, without credentials (`user:token@`, which `fetch`
 * cannot send: the token goes in `--admin-token`). An error quotes the value with its credentials as `***`.
 */
function adminUrl(value: string): string {
  let url: URL | undefined
  try {
    url = new URL(value)
  } catch {}
  const credentials = /^(?:[^/?#]*\/\/)?([^/?#]*)@/.exec(value)?.[1]
  const shown = JSON.stringify(credentials ? value.replace(`${credentials}@`, '***@') : value)
  if (url?.protocol !== 'http:' && url?.protocol !== 'https:')
    throw usage(
      `\`--admin\` takes an admin endpoint's http:// or https:// base URL, e.g. http://10.0.0.7:3000/_ratewindow; received ${shown}.`,
    )
  if (url.username !== '' || url.password !== '')
    throw usage(
      `\`--admin\` takes a URL without credentials (user:password@); pass the endpoint's token with --admin-token or RATEWINDOW_ADMIN_TOKEN; received ${shown}.`,
    )
  return value
}

function keyOf(rest: string[], command: string): string {
  const key = rest[0]
  if (key === undefined)
    throw usage(`\`${command}\` needs a key, e.g. \`ratewindow ${command} customer:42\`.`)
  return unescapedKey(key)
}

/**
 * A key as typed, its escapes read as the text output writes them (render.ts `printable`), so that a key copied
 * from `top`, `overrides list` or `inspect` names the same key: `\\` a backslash, `\xHH`, `\uHHHH` and `\u{H...}`
 * the code unit or point. Any other backslash is refused (write `\\` for one).
 */
export function unescapedKey(typed: string): string {
  return typed.replace(
    /\\(?:(\\)|x([0-9a-fA-F]{2})|u([0-9a-fA-F]{4})|u\{([0-9a-fA-F]{1,6})\}|)/g,
    (_found, slash, x, u, point) => {
      if (slash !== undefined) return '\\'
      const code = Number.parseInt(x ?? u ?? point ?? '', 16)
      if (Number.isNaN(code) || code > 0x10ffff)
        throw usage(
          `The key ${JSON.stringify(typed)} has a backslash that starts no escape: write \\\\ for a backslash, or \\xHH, \\uHHHH, \\u{HHHHH} as the CLI prints them.`,
        )
      return point !== undefined ? String.fromCodePoint(code) : String.fromCharCode(code)
    },
  )
}

function done<T extends Command>(command: T, extra: string[]): T {
  if (extra.length > 0)
    throw usage(`Unexpected argument ${JSON.stringify(extra[0])}. See \`ratewindow --help\`.`)
  return command
}

/**
 * `--config-timeout`, else `RATEWINDOW_CONFIG_TIMEOUT`, else the default, in ms: seconds (`30`, `2.5`), or a number
 * with its unit (`30s`, `500ms`, `2m`); more than 0, at most an hour.
 */
function configTimeout(flag: string | undefined, env: string | undefined): number {
  const [value, option] =
    flag !== undefined ? [flag, '--config-timeout'] : [env || undefined, 'RATEWINDOW_CONFIG_TIMEOUT']
  if (value === undefined) return DEFAULT_CONFIG_TIMEOUT * 1000
  const match = /^(\d+(?:\.\d+)?)\s*(ms|s|m)?$/.exec(value.trim())
  const ms = match === null ? Number.NaN : Number(match[1]) * { ms: 1, s: 1000, m: 60_000 }[match[2] ?? 's']!
  if (!(ms >= 1 && ms <= 3_600_000))
    throw usage(
      `\`${option}\` takes seconds, more than 0 and at most an hour (e.g. 30, or 30s, 500ms, 2m); received ${JSON.stringify(value)}.`,
    )
  return Math.ceil(ms)
}

function count(value: string | undefined, option: string): number | undefined {
  if (value === undefined) return undefined
  const number = Number(value)
  if (!/^\d+$/.test(value) || !Number.isSafeInteger(number) || number < 1)
    throw usage(`\`${option}\` must be a whole number of at least 1; received ${JSON.stringify(value)}.`)
  return number
}
