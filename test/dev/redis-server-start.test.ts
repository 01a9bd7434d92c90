/**
 * The tests' redis-server processes (test/support/redis-server.ts): a server that cannot start says why at once. A
 * clean-clone run once failed on "did not answer PING within 10000 ms" from a fresh start: a port checked free
 * can be taken before redis-server binds it, and the process then exits; the start now sees the exit, and a start
 * on a port it chose tries another.
 */
import { createServer, type Server } from 'node:net'
import { afterAll, describe, expect, it } from 'vitest'
import { freePort, RedisExitedError, RedisServer } from '../support/redis-server.js'

const listening: Server[] = []
afterAll(() => Promise.all(listening.map((server) => new Promise((resolve) => server.close(resolve)))))

describe('RedisServer.start', () => {
  it('on a port another process holds: fails with the exit and the log, without waiting out the PING bound', async () => {
    const port = await freePort()
    const holder = createServer((socket) => socket.destroy()) // not Redis: whatever connects is turned away
    listening.push(holder)
    await new Promise<void>((resolve) => holder.listen(port, '127.0.0.1', resolve))
    const failed = await RedisServer.start([], port).catch((error: unknown) => error)
    expect(failed).toBeInstanceOf(RedisExitedError)
    expect(String(failed)).toMatch(new RegExp(`port ${port} exited before it answered PING: exit 1; log: .*`))
  })

  it('on a port of its choosing: answers PING', async () => {
    const server = await RedisServer.start()
    try {
      expect(await server.cli('ping')).toContain('PONG')
    } finally {
      await server.stop()
    }
  })
})
