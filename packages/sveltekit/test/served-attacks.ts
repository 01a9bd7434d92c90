/**
 * The attacks on `@ratewindow/sveltekit` that need a real SvelteKit server: each is sent as the attacker sent it
 * (raw HTTP where a client library would tidy the request), to the app that test/runtimes/sveltekit.test.ts builds
 * once and serves with adapter-node (test/runtimes/sveltekit-app). Registered there, inside each served store's
 * describe, so that the app is built once; hostile.test.ts beside this file names them.
 */
import { connect } from 'node:net'
import { expect, it } from 'vitest'
import { until } from '../../../test/support/connections.js'

/** What the runtime test gives each case: the served app. */
export interface ServedKitApp {
  served(): { url: string; output(): string }
}

/** The names of the cases, for hostile.test.ts. */
export const SERVED_ATTACKS = [
  'a client rotating X-Forwarded-For on an app without trust is one client (raw HTTP)',
  'odd spellings of a limited path (percent-encoded, doubled slashes, dot segments, a trailing slash) reach no route unlimited',
  'an X-Forwarded-For entry that is not an address, behind trustProxy, is answered 500 with one warning, not a stack trace per request',
  'many keys: 100 forged client addresses behind trustProxy each get their own count, and an earlier client stays limited',
  'a concurrent flood of 60 at a limit of 3 admits exactly 3',
  // Outside attack round of issue 50 (M1): the README's hook failed `vite build` with "500 /pre" on a prerendered
  // page (getClientAddress() throws then). The app this runs on has one: its build passing is the first half.
  'a page prerendered at build time: the build passes, and the page is served as built',
  // Outside attack round of issue 50 (M3): a page whose load reads an endpoint with `event.fetch` cost its client
  // two, so 3 views fit in a limit of 5, and the page's RateLimit-Remaining was one above the truth.
  'a page whose load reads its own endpoint with event.fetch costs its client one per view, and says so',
  // Outside attack round of issue 50 (H1 on Elysia, M2 on h3; SvelteKit gave the slot back the same way): a slot
  // came back when the route returned, with its streamed body still sending, so streams were not bounded.
  '10 clients reading a stream at concurrency 2: 2 are admitted, the rest 429 until a stream ends',
] as const

/** Sends `request` (raw HTTP/1.1 text) to `url`'s server; resolves with the status of its answer. */
function raw(url: string, request: string): Promise<number> {
  const { hostname, port } = new URL(url)
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname, () => socket.write(request))
    let answer = ''
    socket.setEncoding('utf8')
    socket.on('data', (chunk) => {
      answer += chunk
    })
    socket.on('error', reject)
    socket.on('close', () => resolve(Number(/^HTTP\/1\.1 (\d{3})/.exec(answer)?.[1] ?? 0)))
  })
}

const get = (path: string, headers: string[] = []) =>
  `GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\n${headers.map((line) => `${line}\r\n`).join('')}Connection: close\r\n\r\n`

export function describeKitAttacks(app: ServedKitApp): void {
  const [rotating, paths, garbage, manyKeys, flood, prerendered, subRequest, streams] = SERVED_ATTACKS

  it(rotating, async () => {
    const url = app.served().url
    // /api/limited (limit 3, no trust) may be spent by earlier cases: at most 3 of these pass.
    const statuses: number[] = []
    for (let i = 0; i < 8; i++)
      statuses.push(
        await raw(url, get('/api/limited', [`X-Forwarded-For: 192.0.2.${i}`, `X-Real-IP: 192.0.2.${i}`])),
      )
    expect(statuses.filter((status) => status === 200).length).toBeLessThanOrEqual(3)
    expect(statuses.slice(-4)).toEqual([429, 429, 429, 429])
  })

  it(paths, async () => {
    const url = app.served().url
    // The /api/trusted limiter (limit 3) keys by the forwarded entry: a client of its own for this case.
    const client = 'X-Forwarded-For: 203.0.113.77'
    const spellings = [
      '/api/trusted',
      '/api/%74rusted',
      '//api/trusted',
      '/api/./trusted',
      '/api/x/../trusted',
      '/api/trusted/',
      '/API/trusted',
      '/api/trusted?x=1',
      '/api/trusted;x',
    ]
    const served: string[] = []
    for (const path of spellings) {
      const status = await raw(url, get(path, [client]))
      if (status === 200) served.push(path)
    }
    // Whatever reaches the route counts for the client: 3 at most, however it is spelled.
    expect(served.length).toBeLessThanOrEqual(3)
  })

  it(garbage, async () => {
    const { url, output } = app.served()
    const before = output().length
    const statuses: number[] = []
    for (let i = 0; i < 10; i++)
      statuses.push(
        await raw(url, get('/api/trusted', [`X-Forwarded-For: ${i % 2 ? 'unknown' : 'not an address'}`])),
      )
    expect(new Set(statuses)).toEqual(new Set([500]))
    // One warning per process (an earlier case may have printed it already); never a stack trace per request.
    await until(
      () => output().includes('RATEWINDOW_INVALID_ADDRESS'),
      () => `the warning was printed (output: ${output()})`,
    )
    expect(output().slice(before).split('ERR_RATEWINDOW_INVALID_IP').length - 1).toBe(0)
  })

  it(manyKeys, async () => {
    const url = `${app.served().url}/api/trusted`
    const send = (client: string) => fetch(url, { headers: { 'x-forwarded-for': client } })
    for (let i = 0; i < 4; i++) await send('203.0.113.88')
    const statuses: number[] = []
    for (let batch = 0; batch < 5; batch++)
      statuses.push(
        ...(await Promise.all(
          Array.from({ length: 20 }, (_, i) => send(`10.${batch}.${i}.1`).then((each) => each.status)),
        )),
      )
    expect(new Set(statuses)).toEqual(new Set([200]))
    expect((await send('203.0.113.88')).status).toBe(429)
  })

  it(flood, async () => {
    const url = `${app.served().url}/api/trusted`
    const statuses = await Promise.all(
      Array.from({ length: 60 }, () =>
        fetch(url, { headers: { 'x-forwarded-for': '203.0.113.99' } }).then((each) => each.status),
      ),
    )
    expect(statuses.filter((status) => status === 200)).toHaveLength(3)
    expect(statuses.filter((status) => status === 429)).toHaveLength(57)
  })

  it(prerendered, async () => {
    const response = await fetch(`${app.served().url}/pre`)
    expect(response.status).toBe(200)
    expect(await response.text()).toContain('prerendered')
  })

  it(subRequest, async () => {
    const url = `${app.served().url}/sub`
    const view = () => fetch(url, { headers: { 'x-forwarded-for': '203.0.113.120' } })
    const remaining: (string | null)[] = []
    for (let i = 0; i < 3; i++) {
      const response = await view()
      expect(response.status).toBe(200)
      remaining.push(response.headers.get('ratelimit-remaining'))
    }
    expect(remaining).toEqual(['2', '1', '0'])
    expect((await view()).status).toBe(429)
  })

  it(streams, async () => {
    const { url } = app.served()
    const client = { 'x-forwarded-for': '203.0.113.121' }
    await fetch(`${url}/api/release?hold`, { method: 'POST' })
    const first = await Promise.all([1, 2].map(() => fetch(`${url}/api/stream`, { headers: client })))
    expect(first.map((response) => response.status)).toEqual([200, 200])
    const readers = first.map((response) => response.body!.getReader())
    // Both sent their first chunk; their last is held.
    await Promise.all(readers.map((reader) => reader.read()))
    const more = await Promise.all(
      Array.from({ length: 8 }, () =>
        raw(url, get('/api/stream', [`X-Forwarded-For: ${client['x-forwarded-for']}`])),
      ),
    )
    expect(more).toEqual(Array(8).fill(429))
    await fetch(`${url}/api/release`, { method: 'POST' })
    for (const reader of readers) while (!(await reader.read()).done);
    await until(async () => {
      const response = await fetch(`${url}/api/stream`, { headers: client })
      await response.body?.cancel()
      return response.status === 200
    }, 'a stream is admitted once both ended')
  })
}
