/**
 * A B2B API on Fastify 5 and Redis (REDIS_URL; a Cluster with REDIS_CLUSTER=host:port,…): customers authenticate
 * with an API key the server issued, each on a plan; a rate and a monthly quota of the customer's plan are decided in
 * one atomic call, which records the plan beside the customer's counts (the operator tools show it). Past the quota: 402
 * with Retry-After to the next billing day. GET /billing: the caller's usage. GET /export costs 10 units. Past 80 %
 * of the month: a RateLimit-Warning field on every answer, and a line in the log once.
 */
import { RedisStore, rateLimit } from '@ratewindow/fastify'
import Fastify, { type FastifyRequest } from 'fastify'
import { Cluster, Redis } from 'ioredis'
import { PLANS, PREFIX } from './limits.js'

type Plan = keyof typeof PLANS

/** API keys the server issued, whose they are and their plan. A key not here belongs to nobody. */
const CUSTOMERS = new Map<string, { id: string; plan: Plan }>([
  ['key-of-acme', { id: 'acme', plan: 'free' }],
  ['key-of-globex', { id: 'globex', plan: 'pro' }],
])

declare module 'fastify' {
  interface FastifyRequest {
    customer?: { id: string; plan: Plan }
  }
}

/** ioredis with settings that never hang a request nor resend a decision after a reconnect (docs/redis.md). */
function redisClient(): Redis | Cluster {
  const options = { maxRetriesPerRequest: 1, autoResendUnfulfilledCommands: false }
  const seeds = process.env.REDIS_CLUSTER?.split(',')
  if (seeds !== undefined) {
    const nodes = seeds.map((seed) => ({ host: seed.split(':')[0]!, port: Number(seed.split(':')[1]) }))
    return new Cluster(nodes, { redisOptions: options })
  }
  return new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', options)
}

const keyOf = (request: FastifyRequest) => `customer:${request.customer!.id}`

const app = Fastify()
// Authentication first: a request without a key the server issued never reaches the limiter.
app.addHook('onRequest', async (request, reply) => {
  const given = request.headers['x-api-key'] ?? (request.query as { api_key?: unknown }).api_key
  const customer = typeof given === 'string' ? CUSTOMERS.get(given) : undefined
  if (customer === undefined) return reply.code(401).send({ error: 'Unauthorized' })
  request.customer = customer
})
await app.register(rateLimit, {
  store: new RedisStore({ client: redisClient() }),
  prefix: PREFIX,
  plans: PLANS, // each customer's own plan; overrides over it: `ratewindow overrides set` (README)
  hook: 'preHandler', // after authentication: `key` and `plan` see the customer
  key: keyOf,
  plan: (request) => request.customer!.plan,
  quotaStatusCode: 402,
  warnHeader: true,
  observer: {
    onDecision: (event) => {
      for (const near of event.nearLimits ?? [])
        if (near.rule === 'monthly')
          console.log(`${event.result.key}: ${near.remaining} of ${near.limit} left this month`)
    },
  },
})

app.get('/', async () => 'hello\n')
// An export costs 10 of the month's units, from the same budget as every route.
app.get('/export', { config: { ratewindow: { cost: 10 } } }, async () => 'id,amount\n')
// What the billing page shows: read in one store call, charging nothing (the route itself is not counted).
app.get('/billing', { config: { ratewindow: false } }, async (request) => {
  const usage = await app.ratewindow.operator().usage(keyOf(request))
  const monthly = usage.rules.find((rule) => rule.name === 'monthly')!
  return {
    plan: usage.plan,
    used: monthly.used,
    limit: monthly.limit,
    renews: new Date(monthly.periodEnd!).toISOString(),
  }
})

await app.listen({ port: Number(process.env.PORT ?? 3000), host: '127.0.0.1' })
