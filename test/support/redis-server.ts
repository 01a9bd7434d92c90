/**
 * Real redis-server processes for the tests, on free loopback ports: a standalone server and a Redis Cluster
 * built with `redis-cli --cluster create`. Nothing here is mocked.
 */
import { type ChildProcess, execFile, spawn, spawnSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { createConnection, createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'

const run = promisify(execFile)
const HOST = '127.0.0.1'

export const REDIS_MISSING =
  'redis-server was not found on PATH. The Redis tests need a real server: install it with ' +
  '`apt-get install redis-server redis-tools` (Debian/Ubuntu, as root) or `brew install redis`, ' +
  'or run `pnpm test:all`, which installs it when it can.'

/** Why Redis tests cannot run here, or undefined when redis-server and redis-cli are on PATH. */
export function redisUnavailable(): string | undefined {
  for (const binary of ['redis-server', 'redis-cli']) {
    if (spawnSync(binary, ['--version']).error) return REDIS_MISSING
  }
  return undefined
}

function portIsFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer()
    server.once('error', () => resolve(false))
    server.listen(port, HOST, () => server.close(() => resolve(true)))
  })
}

/** A free port whose cluster bus port (+10000) is free too. */
export async function freePort(): Promise<number> {
  for (let attempt = 0; attempt < 200; attempt++) {
    const port = 20_000 + Math.floor(Math.random() * 30_000)
    if ((await portIsFree(port)) && (await portIsFree(port + 10_000))) return port
  }
  throw new Error('no free port found for redis-server')
}

/** Resolves once the server at `port` answers PING; rejects early once `gone()` says the process exited. */
export async function waitForPing(
  port: number,
  timeoutMs = 10_000,
  gone: () => string | undefined = () => undefined,
): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (Date.now() < deadline) {
    const exited = gone()
    if (exited) throw new RedisExitedError(port, exited)
    const answered = await new Promise<boolean>((resolve) => {
      const socket = createConnection({ host: HOST, port })
      socket.setTimeout(500)
      socket.once('connect', () => socket.write('PING\r\n'))
      socket.once('data', (data) => {
        socket.destroy()
        resolve(data.toString().startsWith('+PONG'))
      })
      socket.once('error', () => resolve(false))
      socket.once('close', () => resolve(false)) // closed without an answer (after `data`, a no-op)
      socket.once('timeout', () => {
        socket.destroy()
        resolve(false)
      })
    })
    if (answered) return
    await new Promise((resolve) => setTimeout(resolve, 25))
  }
  throw new Error(`redis-server on port ${port} did not answer PING within ${timeoutMs} ms`)
}

/** The redis-server process ended before it answered PING (most often: its port was taken after it was checked). */
export class RedisExitedError extends Error {
  constructor(port: number, why: string) {
    super(`redis-server on port ${port} exited before it answered PING: ${why}`)
  }
}

/** The last lines of a server's log, for an error message. */
function logTail(dir: string): string {
  try {
    return readFileSync(join(dir, 'redis.log'), 'utf8').trim().split('\n').slice(-3).join(' | ')
  } catch {
    return 'no log written'
  }
}

export class RedisServer {
  #process: ChildProcess | undefined
  constructor(
    readonly port: number,
    readonly dir: string,
    readonly extraArgs: readonly string[] = [],
  ) {}

  /**
   * Starts a server on `port`, or on a free port: a port checked free can be taken before redis-server binds it
   * (another worker's server), so a start on a chosen port is tried again on another, up to 3 times.
   */
  static async start(extraArgs: readonly string[] = [], port?: number): Promise<RedisServer> {
    for (let attempt = 1; ; attempt++) {
      const server = new RedisServer(
        port ?? (await freePort()),
        mkdtempSync(join(tmpdir(), 'ratewindow-redis-')),
        extraArgs,
      )
      try {
        await server.restart()
        return server
      } catch (error) {
        await server.stop() // one that never answered is still running: killed, not left behind
        if (port !== undefined || attempt === 3 || !(error instanceof RedisExitedError)) throw error
      }
    }
  }

  /** Starts (again) on the same port, as after a crash. */
  async restart(): Promise<void> {
    const missing = redisUnavailable()
    if (missing) throw new Error(missing)
    const args = [
      '--port',
      String(this.port),
      '--bind',
      HOST,
      '--save',
      '',
      '--appendonly',
      'no',
      '--dir',
      this.dir,
      '--logfile',
      'redis.log',
    ]
    const child = spawn('redis-server', [...args, ...this.extraArgs], { stdio: 'ignore' })
    this.#process = child
    let exited: string | undefined
    child.on('error', (error) => {
      exited = error.message
    })
    child.once('exit', (code, signal) => {
      exited = `exit ${code ?? signal}; log: ${logTail(this.dir)}`
    })
    child.unref()
    await waitForPing(this.port, 10_000, () => exited)
  }

  /** Kills the process the hard way (no shutdown, no save), and waits for it to be gone. */
  async kill(signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    const child = this.#process
    if (!child || child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return
    const exited = new Promise((resolve) => child.once('exit', resolve))
    child.ref() // keep the event loop alive until the exit is seen
    child.kill(signal)
    await exited
  }

  async stop(): Promise<void> {
    await this.kill('SIGKILL')
    rmSync(this.dir, { recursive: true, force: true })
  }

  async cli(...args: string[]): Promise<string> {
    const { stdout } = await run('redis-cli', ['-h', HOST, '-p', String(this.port), ...args])
    return stdout
  }
}

/** How long a Cluster node may be unreachable before it is failing (`cluster-node-timeout`), ms. */
export const CLUSTER_NODE_TIMEOUT_MS = 1_000

const CLUSTER_NODE_ARGS = [
  '--cluster-enabled',
  'yes',
  '--cluster-config-file',
  'nodes.conf',
  '--cluster-node-timeout',
  String(CLUSTER_NODE_TIMEOUT_MS),
  '--cluster-require-full-coverage',
  'no',
  // A replica may always take over: an idle test cluster would otherwise look too stale to fail over.
  '--cluster-replica-validity-factor',
  '0',
  '--repl-ping-replica-period',
  '1',
  '--repl-diskless-sync-delay',
  '0',
]

export class RedisClusterProcesses {
  constructor(readonly nodes: RedisServer[]) {}

  static async start(masters = 3, replicasPerMaster = 0): Promise<RedisClusterProcesses> {
    const count = masters * (1 + replicasPerMaster)
    const nodes: RedisServer[] = []
    for (let i = 0; i < count; i++) nodes.push(await RedisServer.start(CLUSTER_NODE_ARGS))
    const cluster = new RedisClusterProcesses(nodes)
    await run('redis-cli', [
      '--cluster',
      'create',
      ...nodes.map((node) => `${HOST}:${node.port}`),
      '--cluster-replicas',
      String(replicasPerMaster),
      '--cluster-yes',
    ])
    await cluster.waitUntilHealthy()
    return cluster
  }

  get startupNodes(): { host: string; port: number }[] {
    return this.nodes.map((node) => ({ host: HOST, port: node.port }))
  }

  /** Waits until every live node reports cluster_state:ok. */
  async waitUntilHealthy(timeoutMs = 20_000, nodes = this.nodes): Promise<void> {
    const deadline = Date.now() + timeoutMs
    for (const node of nodes) {
      while (!(await node.cli('cluster', 'info')).includes('cluster_state:ok')) {
        if (Date.now() > deadline) throw new Error(`cluster node ${node.port} did not reach cluster_state:ok`)
        await new Promise((resolve) => setTimeout(resolve, 50))
      }
    }
  }

  /**
   * Waits until every replica has every write its master has (replication is asynchronous: a master killed
   * earlier takes its last writes with it).
   */
  async waitForReplication(timeoutMs = 20_000): Promise<void> {
    const deadline = Date.now() + timeoutMs
    for (const node of this.nodes) {
      for (;;) {
        const info = await node.cli('info', 'replication')
        if (!info.includes('role:master')) break
        const offset = /master_repl_offset:(\d+)/.exec(info)?.[1]
        const replicas = [...info.matchAll(/slave\d+:.*state=(\w+),offset=(\d+)/g)]
        if (replicas.every(([, state, at]) => state === 'online' && at === offset)) break
        if (Date.now() > deadline) throw new Error(`the replicas of node ${node.port} did not catch up`)
        await new Promise((resolve) => setTimeout(resolve, 50))
      }
    }
  }

  /** Starts one more node and joins it as a master without slots, once every node knows it and it is ok. */
  async addNode(): Promise<RedisServer> {
    const node = await RedisServer.start(CLUSTER_NODE_ARGS)
    await this.nodes[0]!.cli('cluster', 'meet', HOST, String(node.port))
    this.nodes.push(node)
    const deadline = Date.now() + 20_000
    const knowsAll = async (member: RedisServer) => {
      const known = await member.cli('cluster', 'nodes')
      return this.nodes.every((other) => known.includes(`:${other.port}@`))
    }
    for (const member of this.nodes) {
      while (!(await knowsAll(member))) {
        if (Date.now() > deadline) throw new Error(`node ${member.port} did not learn of every node`)
        await new Promise((resolve) => setTimeout(resolve, 50))
      }
    }
    await this.waitUntilHealthy(20_000, [node])
    return node
  }

  /** The port of the master serving `slot`, from CLUSTER NODES as `node` sees it. */
  async slotOwner(slot: number, node = this.nodes[0]!): Promise<number> {
    // Each line: id host:port@bus flags master ping pong epoch link, then slots (`5461`, `0-5460`, `[…]` moving).
    for (const line of (await node.cli('cluster', 'nodes')).trim().split('\n')) {
      const [, address, flags, , , , , , ...slots] = line.split(' ')
      if (!flags?.includes('master')) continue
      for (const range of slots) {
        if (range.startsWith('[')) continue
        const [from, to = from] = range.split('-').map(Number)
        if (slot >= from! && slot <= to!) return Number(/:(\d+)@/.exec(address!)?.[1])
      }
    }
    throw new Error(`no node serves slot ${slot}`)
  }

  /** Moves `slot` and its keys to `target`, as `redis-cli --cluster reshard` does, one slot only. */
  async moveSlot(slot: number, target: RedisServer): Promise<void> {
    const ownerPort = await this.slotOwner(slot)
    const source = this.nodes.find((node) => node.port === ownerPort)!
    const id = async (node: RedisServer) => (await node.cli('cluster', 'myid')).trim()
    const [sourceId, targetId] = [await id(source), await id(target)]
    const ok = async (node: RedisServer, ...args: string[]) => {
      const reply = (await node.cli(...args)).trim()
      if (reply !== 'OK' && reply !== 'NOKEY') throw new Error(`${args.join(' ')} on ${node.port}: ${reply}`)
    }
    await ok(target, 'cluster', 'setslot', String(slot), 'importing', sourceId)
    await ok(source, 'cluster', 'setslot', String(slot), 'migrating', targetId)
    for (;;) {
      const keys = (await source.cli('cluster', 'getkeysinslot', String(slot), '100'))
        .split('\n')
        .filter(Boolean)
      if (keys.length === 0) break
      await ok(source, 'migrate', HOST, String(target.port), '', '0', '5000', 'KEYS', ...keys)
    }
    for (const node of [target, source, ...this.nodes.filter((n) => n !== target && n !== source)]) {
      await ok(node, 'cluster', 'setslot', String(slot), 'node', targetId)
    }
  }

  async stop(): Promise<void> {
    await Promise.all(this.nodes.map((node) => node.stop()))
  }
}
