/**
 * Counters of one's own for each test, each test file and each worker: parallel test files on one Redis (vitest
 * and jest run files in several workers) must not use up each other's quota, and a test must not inherit the
 * counts of the one before.
 */

let made = 0
/** Distinct per process and per module instance (vitest isolates each file; jest too). */
const run = Math.random().toString(36).slice(2, 8)

/** The test worker this process is: vitest's pool id, jest's worker id, else the process id. */
export function workerId(): string {
  const env = (globalThis as { process?: { env?: Record<string, string | undefined>; pid?: number } }).process
  return (
    env?.env?.VITEST_POOL_ID ??
    env?.env?.VITEST_WORKER_ID ??
    env?.env?.JEST_WORKER_ID ??
    String(env?.pid ?? 0)
  )
}

/**
 * A fresh `prefix` for a `RedisStore` (or a limiter): `<name>:w<worker>:<run>.<n>:`, different in each worker,
 * each test file and each call. Call it once per test for counters of the test's own (nothing to wipe: the old
 * keys expire with their windows), or once per file.
 * @example const store = new RedisStore({ client, prefix: testPrefix('api') })
 */
export function testPrefix(name = 'test'): string {
  if (!/^[A-Za-z0-9_.-]{1,32}$/.test(name)) {
    throw new TypeError(
      `testPrefix: \`name\` must be letters, digits, \`_\`, \`.\` or \`-\`; received ${JSON.stringify(name)}.`,
    )
  }
  return `${name}:w${workerId()}:${run}.${made++}:`
}

type Reply = unknown
/** The Redis clients whose commands the wipe can send. */
interface Commander {
  /** ioredis, iovalkey */
  call?: (command: string, ...args: string[]) => Promise<Reply>
  /** node-redis */
  sendCommand?: (args: string[]) => Promise<Reply>
  /** Valkey GLIDE */
  customCommand?: (args: string[]) => Promise<Reply>
}

/**
 * Deletes every key under `prefix` (SCAN and DEL, on each master of a Cluster): for a `beforeEach` that gives each
 * test fresh counters under a store's fixed prefix. Resolves the number of keys deleted. Works with ioredis and
 * iovalkey (standalone and Cluster), node-redis (standalone and cluster) and Valkey GLIDE (standalone).
 * Never run it with a prefix that production keys share.
 */
export async function wipeRedisPrefix(client: unknown, prefix: string): Promise<number> {
  if (typeof prefix !== 'string' || prefix.length === 0 || /[*?[\]\\]/.test(prefix)) {
    throw new TypeError(
      `wipeRedisPrefix: \`prefix\` must be a non-empty string without glob characters (* ? [ ] \\); received ${JSON.stringify(prefix)}.`,
    )
  }
  let deleted = 0
  for (const node of await mastersOf(client)) deleted += await wipeNode(node, prefix)
  return deleted
}

async function mastersOf(client: unknown): Promise<Commander[]> {
  const candidate = client as {
    nodes?: (role: string) => Commander[]
    masters?: unknown[]
    nodeClient?: (node: unknown) => Commander | Promise<Commander>
  } & Commander
  if (typeof candidate?.nodes === 'function') return candidate.nodes('master') // ioredis Cluster
  if (Array.isArray(candidate?.masters) && typeof candidate.nodeClient === 'function') {
    return Promise.all(candidate.masters.map((master) => candidate.nodeClient!(master))) // node-redis cluster
  }
  if (
    typeof candidate?.call === 'function' ||
    typeof candidate?.sendCommand === 'function' ||
    typeof candidate?.customCommand === 'function'
  ) {
    return [candidate]
  }
  throw new TypeError(
    'wipeRedisPrefix: `client` must be an ioredis or iovalkey client or Cluster, a node-redis client or cluster, or a Valkey GLIDE standalone client.',
  )
}

function send(node: Commander, args: string[]): Promise<Reply> {
  if (typeof node.call === 'function') return node.call(args[0]!, ...args.slice(1))
  if (typeof node.sendCommand === 'function') return node.sendCommand(args)
  return node.customCommand!(args)
}

const text = (value: unknown) =>
  typeof value === 'string'
    ? value
    : value instanceof Uint8Array
      ? new TextDecoder().decode(value)
      : String(value)

async function wipeNode(node: Commander, prefix: string): Promise<number> {
  let cursor = '0'
  let deleted = 0
  do {
    const reply = (await send(node, ['SCAN', cursor, 'MATCH', `${prefix}*`, 'COUNT', '500'])) as [
      unknown,
      unknown[],
    ]
    cursor = text(reply[0])
    const keys = reply[1].map(text)
    // One key per DEL: keys under one prefix may live in different hash slots.
    for (const key of keys) deleted += Number(await send(node, ['DEL', key]))
  } while (cursor !== '0')
  return deleted
}
