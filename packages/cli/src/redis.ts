/**
 * The CLI's Redis connection (ioredis, standalone or Cluster) and the reads a RedisStore never makes: the keys of
 * one hash tag through its slot, and the raw keys that override records hold. Key names are read by core
 * (`decodeStoredKey`, `storedKeyPattern`, `storedSlot`), never here (the one name written here, a record's, is
 * checked by core's reading); a scan of every key is the store's own (`scanStoredKeys`, `topStored`).
 */
import { RedisStore } from '@ratewindow/core'
import { decodeStoredKey, storedHash, storedKeyPattern, storedSlot } from '@ratewindow/core/stored'
import { Cluster, Redis } from 'ioredis'
import { CliError, usage } from './errors.js'

/** An open connection: the client, and the RedisStore the commands use on it. */
export interface Connection {
  readonly client: Redis | Cluster
  readonly store: RedisStore
  readonly cluster: boolean
  close(): Promise<void>
}

/** The longest the CLI waits for Redis to answer its first command. */
const CONNECT_TIMEOUT_MS = 5_000

/**
 * Connects to `url`; as a Cluster client when the server says it is a Cluster node (`cluster_enabled:1`; with
 * `cluster`, it must say so: exit code 2). Fails with exit code 4 when Redis cannot be reached or refuses the
 * URL's database.
 */
export async function connect(
  url: string,
  options: { cluster: boolean; prefix: string },
): Promise<Connection> {
  const first = new Redis(url, clientOptions())
  let client: Redis | Cluster = first
  // The connection's own error says why (refused, no such host); the command's rejection only that it closed.
  let cause: Error | undefined
  const remember = (error: Error) => {
    cause ??= error
  }
  first.on('error', remember)
  try {
    await first.connect()
    const clusterNode = /cluster_enabled:1/.test(await first.info('cluster'))
    if (options.cluster && !clusterNode)
      throw usage(
        `\`--cluster\`: Redis at ${redacted(url)} is not a Cluster node (INFO cluster says cluster_enabled:0); leave out \`--cluster\`.`,
      )
    const db = first.options.db ?? 0
    if (clusterNode && db !== 0)
      throw usage(
        `Redis at ${redacted(url)} is a Cluster node: a Cluster has database 0 only, the URL names ${db}.`,
      )
    // ioredis selects the URL's database as it connects and goes on in database 0 when the server refuses it:
    // select it again, so that a refusal fails the command before it reads or writes anything.
    if (db !== 0)
      await first.select(db).catch((error: Error) => {
        throw new CliError(
          'ERR_RATEWINDOW_REDIS_UNREACHABLE',
          `Redis at ${redacted(url)} refused database ${db}: ${error.message}`,
        )
      })
    if (clusterNode) {
      const { host, port } = first.options
      first.disconnect()
      const startup = new Cluster([{ host: host!, port: port! }], {
        lazyConnect: true,
        enableOfflineQueue: true,
        clusterRetryStrategy: () => null,
        redisOptions: { ...clientOptions(), ...credentialsOf(first) },
      })
      client = startup
      startup.on('error', remember)
      await startup.connect()
    }
  } catch (error) {
    client.disconnect()
    if (error instanceof CliError) throw error
    throw new CliError(
      'ERR_RATEWINDOW_REDIS_UNREACHABLE',
      `Redis at ${redacted(url)} could not be reached: ${(cause ?? (error as Error)).message}`,
      { cause: cause ?? error },
    )
  }
  const store = new RedisStore({ client, prefix: options.prefix })
  return {
    client,
    store,
    cluster: client instanceof Cluster,
    close: async () => {
      await client.quit().catch(() => client.disconnect())
    },
  }
}

function clientOptions() {
  return {
    lazyConnect: true,
    connectTimeout: CONNECT_TIMEOUT_MS,
    maxRetriesPerRequest: 1,
    retryStrategy: () => null,
    enableOfflineQueue: false,
  }
}

function credentialsOf(client: Redis): { username?: string; password?: string; tls?: object } {
  const { username, password, tls } = client.options
  return { ...(username && { username }), ...(password && { password }), ...(tls && { tls }) }
}

/** `url` without its password, for messages. */
function redacted(url: string): string {
  return url.replace(/\/\/([^:@/]*):[^@/]*@/, '//$1:***@')
}

/**
 * The keys of one hash tag (one client key, in every limiter of the store). On a Cluster, asked of the master of
 * its slot (`CLUSTER GETKEYSINSLOT`, the slot's keys only: no scan of the keyspace); on one server, a SCAN
 * matching the tag.
 */
export async function keysOfHash(client: Redis | Cluster, prefix: string, hash: string): Promise<string[]> {
  const pattern = storedKeyPattern(prefix, hash)
  const tag = `{${hash}}:`
  if (client instanceof Cluster) {
    const slot = storedSlot(hash)
    const [address] = (client.slots[slot] ?? []) as string[]
    const master = client
      .nodes('master')
      .find((node) => `${node.options.host}:${node.options.port}` === address)
    if (master === undefined) throw new CliError('ERR_RATEWINDOW_NOT_FOUND', `No master serves slot ${slot}.`)
    const inSlot = (await master.call('CLUSTER', 'GETKEYSINSLOT', String(slot), '100000')) as string[]
    return inSlot.filter((key) => key.startsWith(prefix) && key.includes(tag))
  }
  const keys: string[] = []
  let cursor = '0'
  do {
    const [next, found] = await client.scan(cursor, 'MATCH', pattern, 'COUNT', 1000)
    cursor = next
    keys.push(...found)
  } while (cursor !== '0')
  return keys
}

/**
 * The name of the override record of `hash` under `scope`, as docs/operating-limits.md gives it
 * (`<store prefix><scope>{<hash>}:o`), checked by core's reading of key names: undefined if core reads it otherwise.
 */
function recordName(prefix: string, scope: string, hash: string): string | undefined {
  const name = `${prefix}${scope}{${hash}}:o`
  const read = decodeStoredKey(name, prefix)
  return read?.part.kind === 'override' && read.namespace === scope && read.hash === hash ? name : undefined
}

/**
 * The raw client keys that override records under `scopes` hold for `hashes` (one MGET per hash: the records of one
 * client share its hash tag, so its slot), each checked against its hash. What `top` shows for the keys a scan ranked
 * without reading their records (`--scan` stopped before them).
 */
export async function recordedKeys(
  client: Redis | Cluster,
  prefix: string,
  hashes: readonly string[],
  scopes: ReadonlySet<string>,
): Promise<Map<string, string>> {
  const found = new Map<string, string>()
  if (scopes.size === 0) return found
  await Promise.all(
    hashes.map(async (hash) => {
      const names = [...scopes].flatMap((scope) => recordName(prefix, scope, hash) ?? [])
      if (names.length === 0) return
      for (const json of await client.mget(names)) {
        const key = keyOfRecord(json)
        if (key !== undefined && storedHash(key) === hash) {
          found.set(hash, key)
          return
        }
      }
    }),
  )
  return found
}

/** The client key a record's JSON holds (`OverrideRecord.key`), if it is one. */
function keyOfRecord(json: string | null): string | undefined {
  if (json === null) return undefined
  try {
    const { key } = JSON.parse(json) as { key?: unknown }
    return typeof key === 'string' ? key : undefined
  } catch {
    return undefined
  }
}
