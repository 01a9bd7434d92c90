/** `ratewindow --help` and `ratewindow help <command>`: usage with examples for each command. */

const GLOBAL = `Options (every command):
  --redis URL          Redis to read (redis:// or rediss://); default REDIS_URL, else redis://127.0.0.1:6379
  --cluster            expect a Cluster (without it the CLI asks the server); exit 2 when it is not one
  --prefix PREFIX      the RedisStore's \`prefix\` option (default ''; with \`separator: true\`, end it with \`:\`)
  --config FILE        a module exporting the application's limiters (\`export const limiters = [...]\`):
                       .mjs, .js or .cjs (.ts through a loader: NODE_OPTIONS='--import tsx')
  --config-timeout S   the longest --config may take to load: seconds, or 30s, 2m (default 10; or
                       RATEWINDOW_CONFIG_TIMEOUT)
  --limiter NAME       a limiter: its \`name\` in the config, or its namespace (e.g. rw:fw60000x100:)
  --json               print one JSON document (shapes: the package README)
  --scan N             read at most N keys when scanning (default 100000)
  -h, --help           this help; \`ratewindow help <command>\` for one command
  --version            the CLI's version

A key that starts with \`-\` goes last, after \`--\`: ratewindow inspect --limiter api -- -42

Exit codes: 0 ok, 1 error, 2 usage, 3 not found, 4 Redis unreachable.`

export const COMMAND_HELP: Record<string, string> = {
  limiters: `ratewindow limiters
  The limiters found in Redis (namespaces and their rules, decoded from the key names; with --config, named),
  and the override scopes, with the keys found under each.
  Example: ratewindow limiters --redis redis://10.0.0.5:6379 --prefix app:`,
  top: `ratewindow top [--count N] [--scan N]
  The keys nearest their limit (the share of the limit used, per key's nearest rule), read from a scan: reads
  only, never on the decision path. --count rows (default 10); --scan bounds the keys read. A key shows raw
  where an override record holds it, else as its hash: inspect --hash reads that one; acting on it needs the raw key.
  Example: ratewindow top --count 20 --scan 500000 --config ./ratewindow.config.mjs`,
  watch: `ratewindow watch [--once] [--admin URL]... [--admin-token TOKEN]
  top, refreshed every second; with --admin (one per process: the base URL of its admin endpoint), each
  process's decisions and most refused keys. --admin-token or RATEWINDOW_ADMIN_TOKEN is sent as a bearer token.
  --once prints one frame and ends. Clears the screen between frames on a terminal only.
  Examples: ratewindow watch --once --config ./ratewindow.config.mjs
            ratewindow watch --admin http://10.0.0.7:3000/_ratewindow --admin http://10.0.0.8:3000/_ratewindow`,
  inspect: `ratewindow inspect KEY
ratewindow inspect --hash HASH
  Where KEY stands in each limiter (or --limiter): limit in force, used, remaining, next free unit, reset,
  override and block. Changes nothing. Without --config, the limiters whose names spell their rules. Exit code 3
  when Redis holds nothing for KEY (with --config, after printing its full quota). An address given for a limiter
  keyed by the client's IP is read as the HTTP engine keys it (an IPv6 address: its /56). --hash reads a key
  that \`top\` shows as its hash.
  Example: ratewindow inspect customer:42 --config ./ratewindow.config.mjs --limiter api`,
  reset: `ratewindow reset KEY --config FILE [--limiter NAME]
  Clears KEY's counters in the limiter (RateLimiter.reset): overrides and manual blocks stay.
  Example: ratewindow reset customer:42 --config ./ratewindow.config.mjs --limiter login`,
  block: `ratewindow block KEY --for DURATION [--reason TEXT] --config FILE [--limiter NAME]
  Refuses every request of KEY for DURATION (at most 24d), whatever its counters say. Needs \`overrides: true\`.
  Example: ratewindow block 203.0.113.9 --for 1h --reason "credential stuffing" --config ./ratewindow.config.mjs --limiter login`,
  unblock: `ratewindow unblock KEY --config FILE [--limiter NAME]
  Ends KEY's manual block (an override stays).
  Example: ratewindow unblock 203.0.113.9 --config ./ratewindow.config.mjs --limiter login`,
  overrides: `ratewindow overrides set KEY (--limit N [--burst N] | --rule NAME=N... | --override JSON) [--ttl DURATION]
ratewindow overrides get KEY
ratewindow overrides delete KEY
ratewindow overrides list [--count N] [--cursor CURSOR]
  One key's limits changed while the service runs (limiter.overrides), seen by every process at its next
  decision. Needs --config and \`overrides: true\`. \`delete\` of a key with no override: exit code 3. \`list\`
  follows the store's cursor until the page holds --count records (100) or the scan ends.
  Examples: ratewindow overrides set customer:42 --limit 1000 --ttl 7d --config ./ratewindow.config.mjs --limiter api
            ratewindow overrides set customer:42 --rule per-minute=600 --config ./ratewindow.config.mjs --limiter api
            ratewindow overrides get customer:42 --config ./ratewindow.config.mjs --limiter api
            ratewindow overrides list --json --config ./ratewindow.config.mjs --limiter api
            ratewindow overrides delete customer:42 --config ./ratewindow.config.mjs --limiter api`,
}

/** `override` is `overrides`, as on the command line. */
const helpOf = (topic: string): string | undefined => COMMAND_HELP[topic === 'override' ? 'overrides' : topic]

/** Whether `topic` is a command with its own help. */
export const hasHelp = (topic: string): boolean => helpOf(topic) !== undefined

/** The help for `topic` (a command), or the whole help. */
export function helpText(topic: string | undefined): string {
  const one = topic === undefined ? undefined : helpOf(topic)
  if (one !== undefined) return `${one}\n\n${GLOBAL}`
  return `ratewindow: ratewindow's limits on Redis, from a terminal

Usage: ratewindow <command> [options]

Commands:
${Object.values(COMMAND_HELP).join('\n\n')}

${GLOBAL}`
}
