/**
 * What reading overrides costs Redis per decision (issue 34), and plans (issue 47): the server's CPU per EVALSHA
 * (INFO commandstats `usec_per_call`) for one limiter without `overrides`, with it for keys without a record, for
 * keys with an override in force, and with `plans` (the first plan's keys, and another plan's, whose limits retune
 * the rules), each on its own keys, alternating rounds of sequential decisions on a local redis-server; then the
 * bytes per key (MEMORY USAGE) of each variant's keys.
 *
 * Run: pnpm --filter @ratewindow/bench exec tsx redis-overrides-cost.ts [-- --decisions 5000 --rounds 5]
 */
import { gcra, RateLimiter, RedisStore, slidingWindowCounter } from '@ratewindow/core'
import { Redis } from 'ioredis'
import { RedisServer } from '../test/support/redis-server.js'
import { argument, median } from './stats.js'

const decisions = Number(argument('decisions') ?? '5000')
const rounds = Number(argument('rounds') ?? '5')

const server = await RedisServer.start()
const client = new Redis(server.port, '127.0.0.1')
const rules = () => [
  slidingWindowCounter({ limit: 1_000_000, window: '1m', name: 'minute' }),
  gcra({ limit: 1_000_000, window: '1h', name: 'hour' }),
]
const higher = () => [
  slidingWindowCounter({ limit: 2_000_000, window: '1m', name: 'minute' }),
  gcra({ limit: 2_000_000, window: '1h', name: 'hour' }),
]
const variants = {
  off: new RateLimiter({ rules: rules(), store: new RedisStore({ client }), prefix: 'off' }),
  'on, no record': new RateLimiter({
    rules: rules(),
    store: new RedisStore({ client }),
    prefix: 'on',
    overrides: true,
  }),
  'on, override in force': new RateLimiter({
    rules: rules(),
    store: new RedisStore({ client }),
    prefix: 'in-force',
    overrides: true,
  }),
  'plans, first plan': new RateLimiter({
    plans: { base: rules(), more: higher() },
    store: new RedisStore({ client }),
    prefix: 'plan-first',
  }),
  'plans, another plan': new RateLimiter({
    plans: { base: rules(), more: higher() },
    store: new RedisStore({ client }),
    prefix: 'plan-other',
  }),
}
/** The decision options of each variant: the planned ones name their plan. */
const options: Record<string, { plan?: string } | undefined> = {
  'plans, first plan': { plan: 'base' },
  'plans, another plan': { plan: 'more' },
}
for (let key = 0; key < 100; key++)
  await variants['on, override in force'].overrides.set(`k${key}`, { limit: 2_000_000 })
const usec: Record<string, number[]> = Object.fromEntries(Object.keys(variants).map((name) => [name, []]))
for (let round = 0; round < rounds; round++) {
  for (const [name, limiter] of Object.entries(variants)) {
    for (let i = 0; i < 200; i++) await limiter.limit(`k${i % 100}`, options[name])
    await client.config('RESETSTAT')
    for (let i = 0; i < decisions; i++) await limiter.limit(`k${i % 100}`, options[name])
    const stats = await client.info('commandstats')
    const match = /cmdstat_evalsha:calls=(\d+),usec=(\d+)/.exec(stats)
    usec[name]!.push(Number(match?.[2]) / Number(match?.[1]))
  }
}
for (const [name, values] of Object.entries(usec))
  console.log(
    `${name.padEnd(24)} ${median(values).toFixed(2)} µs of Redis CPU per decision (median of ${rounds})`,
  )
// Bytes per client key: every key a variant keeps for one client (counters, record, plan), by MEMORY USAGE.
for (const [name, limiter] of Object.entries(variants)) {
  const prefix = limiter.prefix
  let bytes = 0
  let stream = 0
  for (const key of await client.keys(`${prefix}:*`)) {
    bytes += Number(await client.memory('USAGE', key))
    stream++
  }
  console.log(
    `${name.padEnd(24)} ${(bytes / 100).toFixed(0)} bytes per client key (${stream} keys for 100 clients)`,
  )
}
client.disconnect()
await server.stop()
