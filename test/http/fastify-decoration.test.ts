/**
 * Issue 19, item 10: `fastify.ratewindow` reaches every registration on the server, in any registration order.
 */
import { rateLimit } from '@ratewindow/fastify'
import fastify5, { type FastifyInstance } from 'fastify'
import fastify4 from 'fastify4'
import { describe, expect, it } from 'vitest'

const key = (request: { headers: Record<string, unknown> }) => String(request.headers['x-user'])

describe.each([
  ['Fastify 5', fastify5],
  ['Fastify 4', fastify4 as unknown as typeof fastify5],
])('%s: the reset handle in any registration order', (_, create) => {
  const get = async (app: FastifyInstance, url: string) =>
    (await app.inject({ url, headers: { 'x-user': 'ann' } })).statusCode

  it("a child that registers before its parent shares the parent's handle", async () => {
    const app = create()
    let childHandle: unknown
    await app.register(async (child) => {
      await child.register(rateLimit, { limit: 1, key, group: 'child' })
      childHandle = child.ratewindow
      child.get('/child', async () => 'ok')
    })
    await app.register(rateLimit, { limit: 2, key })
    app.get('/', async () => 'ok')
    await app.ready()
    expect(childHandle).toBe(app.ratewindow)
    expect([await get(app, '/child'), await get(app, '/child')]).toEqual([200, 429])
    // The parent's reset reaches the child's limiter (before: a handle of its own, still 429).
    await app.ratewindow.resetKey('ann')
    expect([await get(app, '/child'), await get(app, '/child')]).toEqual([200, 429])
    expect([await get(app, '/'), await get(app, '/'), await get(app, '/')]).toEqual([200, 200, 429])
    await app.close()
  })

  it('a root where only children register has the handle, and it reaches every child', async () => {
    const app = create()
    for (const name of ['a', 'b']) {
      await app.register(
        async (child) => {
          await child.register(rateLimit, { limit: 1, key, group: name })
          child.get('/', async () => name)
        },
        { prefix: `/${name}` },
      )
    }
    await app.ready()
    expect(app.hasDecorator('ratewindow')).toBe(true)
    expect([await get(app, '/a'), await get(app, '/a'), await get(app, '/b'), await get(app, '/b')]).toEqual([
      200, 429, 200, 429,
    ])
    await app.ratewindow.resetKey('ann')
    expect([await get(app, '/a'), await get(app, '/b')]).toEqual([200, 200])
    await app.close()
  })

  it('two servers keep their handles apart', async () => {
    const one = create()
    const two = create()
    await one.register(async (child) => {
      await child.register(rateLimit, { limit: 1, key })
    })
    await two.register(rateLimit, { limit: 1, key })
    await Promise.all([one.ready(), two.ready()])
    expect(one.ratewindow).not.toBe(two.ratewindow)
    await Promise.all([one.close(), two.close()])
  })
})
