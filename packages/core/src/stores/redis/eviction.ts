import { RateLimitError } from '../../support/errors.js'

/** How often the watch reads `INFO` from each Redis node, at most (checks ride on decisions: no timer). */
export const EVICTION_CHECK_INTERVAL_MS = 60_000

/** The part of an ioredis client the watch uses; a client without `info` is not watched. */
interface InfoNode {
  info(section?: string): Promise<string>
  options?: { host?: string; port?: number }
}
interface ClusterLike {
  nodes(role: 'master'): InfoNode[]
}

/**
 * Watches what Redis does to rate limit keys under memory pressure. Every key the store writes has a TTL, so
 * every `maxmemory-policy` but `noeviction` may evict them (`volatile-*` too), and an evicted key restarts its
 * client's limit from zero. Redis says nothing when it does; its `INFO` does: `maxmemory`, `maxmemory_policy`
 * and `evicted_keys`.
 *
 * On the first decision and then at most once per `EVICTION_CHECK_INTERVAL_MS`, the watch reads `INFO` from
 * every node (every master of a Cluster) in the background and turns what it finds into notices, which the
 * store hands to the limiter with the next decision (the limiter reports them to `onError`):
 * - a policy that can evict while `maxmemory` is set: once per node and policy;
 * - keys evicted since the previous check: once per check that saw some.
 * Nodes that cannot answer `INFO` (a command renamed or refused by an ACL, a node down) are skipped quietly.
 * @internal
 */
export class EvictionWatch {
  readonly #client: unknown
  readonly #clock: () => number
  #nextCheck = Number.NEGATIVE_INFINITY
  #checking = false
  readonly #notices: RateLimitError[] = []
  /** Per node: the policy already reported, and `evicted_keys` at the previous check. */
  readonly #nodes = new Map<string, { policy?: string; evicted?: number }>()

  constructor(client: unknown, clock: () => number = () => Date.now()) {
    this.#client = client
    this.#clock = clock
  }

  /** Starts a check when one is due; returns the notices found since the previous call, if any. */
  poll(): RateLimitError[] | undefined {
    const now = this.#clock()
    if (!this.#checking && now >= this.#nextCheck) {
      this.#checking = true
      this.#nextCheck = now + EVICTION_CHECK_INTERVAL_MS
      void this.check().finally(() => {
        this.#checking = false
      })
    }
    return this.#notices.length > 0 ? this.#notices.splice(0) : undefined
  }

  /** Reads `INFO` from every node now and records notices; never rejects. */
  async check(): Promise<void> {
    await Promise.all(this.#infoNodes().map((node) => this.#checkNode(node)))
  }

  #infoNodes(): InfoNode[] {
    const client = this.#client as Partial<ClusterLike & InfoNode> | undefined
    try {
      if (typeof client?.nodes === 'function') return client.nodes('master')
    } catch {
      return []
    }
    return typeof client?.info === 'function' ? [client as InfoNode] : []
  }

  async #checkNode(node: InfoNode): Promise<void> {
    let text: string
    try {
      text = await node.info()
    } catch {
      return
    }
    const field = (name: string) => new RegExp(`^${name}:(.*)$`, 'm').exec(text)?.[1]?.trim()
    const policy = field('maxmemory_policy')
    const maxmemory = Number(field('maxmemory') ?? 0)
    const evicted = Number(field('evicted_keys') ?? Number.NaN)
    const name = `${node.options?.host ?? 'redis'}:${node.options?.port ?? ''}`
    const seen = this.#nodes.get(name) ?? {}
    this.#nodes.set(name, seen)
    if (policy !== undefined && policy !== 'noeviction' && maxmemory > 0 && seen.policy !== policy) {
      this.#notices.push(
        new RateLimitError(
          'ERR_RATEWINDOW_STORE',
          `Redis ${name} runs with maxmemory ${maxmemory} and maxmemory-policy ${policy}: under memory pressure it evicts rate limit keys (all have TTLs, so volatile-* policies evict them too), and each evicted client's limit restarts from zero. Use maxmemory-policy noeviction, or a Redis instance of its own (docs/redis.md, "Memory and eviction").`,
        ),
      )
    }
    if (policy !== undefined) seen.policy = policy
    if (Number.isSafeInteger(evicted)) {
      if (seen.evicted !== undefined && evicted > seen.evicted) {
        this.#notices.push(
          new RateLimitError(
            'ERR_RATEWINDOW_STORE',
            `Redis ${name} evicted ${evicted - seen.evicted} keys since the previous check (maxmemory-policy ${policy ?? 'unknown'}): the limits of evicted clients restarted from zero.`,
          ),
        )
      }
      seen.evicted = evicted
    }
  }
}
