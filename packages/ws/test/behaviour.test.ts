/**
 * How a connection's messages are decided, on the memory store over real `ws` connections: all or nothing across
 * the per-connection and per-key limits, a cost per message, the slot renewed for a connection older than its
 * lease.
 */
import { fixedWindow, MemoryStore } from '@ratewindow/core'
import { afterEach, describe, expect, it } from 'vitest'
import { until } from '../../../test/support/connections.js'
import { type Connected, everyRefusalTold, type TestClient, type TestServer, WS } from './harness.js'

const servers: TestServer[] = []
const clients: TestClient[] = []
afterEach(async () => {
  for (const client of clients.splice(0)) client.terminate()
  await Promise.all(servers.splice(0).map((server) => server.close()))
})

function opened(connected: Connected): TestClient {
  if (!connected.ok) throw new Error(`the upgrade was refused: ${connected.status}`)
  clients.push(connected.client)
  return connected.client
}

describe('the message limits of a connection', () => {
  it('all or nothing: a message one limit refuses gives its charge back to the other', async () => {
    const store = new MemoryStore()
    const server = await WS.start({
      messagesPerConnection: { rules: fixedWindow({ limit: 3, window: '1h' }), store },
      messagesPerKey: { rules: fixedWindow({ limit: 5, window: '1h' }), store },
    })
    servers.push(server)
    const first = opened(await WS.connect(server.port, 'frank'))
    for (let i = 0; i < 4; i++) first.send(`a${i}`)
    await until(() => first.told.length === 1, 'the fourth refused by the per-connection limit')
    // The fourth took nothing from the key's 5: a second connection still gets 2.
    const second = opened(await WS.connect(server.port, 'frank'))
    for (let i = 0; i < 3; i++) second.send(`b${i}`)
    await until(() => second.told.length === 1, 'the third refused by the per-key limit')
    expect(server.delivered).toEqual(['a0', 'a1', 'a2', 'b0', 'b1'])
  })

  it('a cost per message: a message of cost 3 takes 3 of the limit', async () => {
    const server = await WS.start({
      messagesPerConnection: { rules: fixedWindow({ limit: 5, window: '1h' }) },
      cost: ({ data }: { data: unknown }) => (String(data).startsWith('big') ? 3 : 1),
      clock: everyRefusalTold(),
    } as never)
    servers.push(server)
    const client = opened(await WS.connect(server.port))
    for (const text of ['big0', 'small1', 'big2', 'small3', 'small4']) client.send(text)
    await until(() => client.told.length === 2, 'two refused')
    // 3 + 1, then big2 (3 more) is refused, small3 takes the last unit, and small4 finds none.
    expect(server.delivered).toEqual(['big0', 'small1', 'small3'])
  })
})

describe('the connection slot', () => {
  /** A memory store that counts slots taken: the renewals of an open connection show here. */
  class LeaseCounter extends MemoryStore {
    acquired = 0
    override acquire(...args: Parameters<MemoryStore['acquire']>) {
      this.acquired++
      return super.acquire(...args)
    }
  }

  it('is renewed while the connection is open: the limit holds past the lease', async () => {
    const store = new LeaseCounter()
    const server = await WS.start({ connections: { limit: 1, lease: '200ms', store } })
    servers.push(server)
    const client = opened(await WS.connect(server.port, 'gina'))
    await until(
      () => store.acquired >= 4,
      () => `three renewals (${store.acquired - 1} so far)`,
    )
    expect(await WS.connect(server.port, 'gina')).toMatchObject({ ok: false, status: 429 })
    client.close()
    await until(async () => {
      const again = await WS.connect(server.port, 'gina')
      if (again.ok) clients.push(again.client)
      return again.ok
    }, 'the slot back once the connection closed')
  })
})
