/**
 * The bench's server start-up (issue 20, item 11): a pair a framework does not have must end with its error, not
 * hang. No load is generated here: the server process fails before it listens.
 */
import { describe, expect, it } from 'vitest'
import { startServer } from '../bench/http.js'
import { checkPairs, noiseOf, pairsOf, selfPairs } from '../bench/pairs.js'

describe('bench pairs', () => {
  it('refuses a pair naming a configuration the framework does not have, before starting anything', () => {
    expect(() => checkPairs(['fastify'], [['ratewindow', 'koa-ratelimit']])).toThrow(
      /fastify has no configuration koa-ratelimit/,
    )
    expect(() => checkPairs(['koa'], [['ratewindow', 'floor-key']])).not.toThrow()
    expect(() => checkPairs(['koa'], [['ratewindow-synced-x4', 'bare-x4']])).not.toThrow()
    expect(() => checkPairs(['hapi'], [['ratewindow', 'bare']])).toThrow(/no framework hapi/)
  })

  it('pairs Hono (issue 22) on the memory path against the header floor and hono-rate-limiter, which has no Redis row', () => {
    expect(pairsOf('hono')).toEqual([
      ['ratewindow', 'floor-headers'],
      ['floor-key', 'floor-headers'],
      ['ratewindow', 'floor-key'],
      ['ratewindow', 'ratewindow-general'],
      ['ratewindow', 'hono-rate-limiter'],
      ['ratewindow-default-headers', 'hono-rate-limiter'],
    ])
    expect(() => checkPairs(['hono'], pairsOf('hono'))).not.toThrow()
    expect(() => checkPairs(['hono'], [['ratewindow-redis', 'hono-rate-limiter-redis']])).toThrow(
      /hono has no configuration hono-rate-limiter-redis/,
    )
  })

  it('pairs RedisStore with the grouped floor, and each peer with our configuration doing its work (issue 33)', () => {
    const fastify = pairsOf('fastify')
    expect(fastify).toContainEqual(['ratewindow-redis', 'floor-redis-grouped'])
    expect(fastify).toContainEqual(['floor-redis-grouped', 'floor-redis'])
    expect(fastify).toContainEqual(['ratewindow-no-headers', 'rate-limiter-flexible'])
    expect(pairsOf('express')).toContainEqual(['ratewindow-default-headers', 'express-rate-limit'])
    for (const framework of ['express', 'koa', 'fastify', 'hono'])
      expect(() => checkPairs([framework], pairsOf(framework))).not.toThrow()
  })

  it('A/A pairs each configuration of the target pairs against itself, one process a side', () => {
    const pairs = selfPairs('koa')
    expect(pairs).toContainEqual(['ratewindow-redis', 'ratewindow-redis'])
    expect(pairs).toContainEqual(['floor-redis-grouped', 'floor-redis-grouped'])
    expect(pairs.every(([config, reference]) => config === reference && !config.endsWith('-x4'))).toBe(true)
    expect(noiseOf([])).toEqual({ median: 0, round: 0 })
  })

  it('startServer rejects when the server process exits before listening, instead of waiting for ever', async () => {
    const flags = process.env.BENCH_NODE_FLAGS
    process.env.BENCH_NODE_FLAGS = '--conditions=@ratewindow/source' // the sources: no build needed
    try {
      await expect(startServer('fastify', 'koa-ratelimit', 'allowed', 'redis://127.0.0.1:9')).rejects.toThrow(
        /bench server fastify koa-ratelimit exited \(code 1\) before listening/,
      )
    } finally {
      if (flags === undefined) delete process.env.BENCH_NODE_FLAGS
      else process.env.BENCH_NODE_FLAGS = flags
    }
  }, 30_000)
})
