/**
 * The attacks on `@ratewindow/next` that need a real Next.js server: each is sent as the attacker sent it, to the
 * apps that test/runtimes/next.test.ts builds once per entry of its matrix and serves with `next start`
 * (test/runtimes/next-app). Registered there, inside each served app's describe, so that no app is built twice;
 * hostile.test.ts beside this file names them.
 */
import { expect, it } from 'vitest'
import { until } from '../../../test/support/connections.js'

/** What the runtime test gives each case: the served app, and whether its middleware runs on the Edge. */
export interface NextStartApp {
  served(): { url: string; output(): string }
  edge: boolean
}

/** A GET of `path` with `X-Forwarded-For` and any other headers, as a client sends them. */
const get = (app: NextStartApp, path: string, forwardedFor: string, headers: Record<string, string> = {}) =>
  fetch(`${app.served().url}${path}`, { headers: { 'x-forwarded-for': forwardedFor, ...headers } })

const statuses = async (responses: Promise<Response>[]) =>
  (await Promise.all(responses)).map((each) => each.status)

/** How many times `text` is in `output` from `from` on. */
const count = (output: string, text: string, from = 0) => output.slice(from).split(text).length - 1

/** The names of the cases, for hostile.test.ts. */
export const NEXT_START_ATTACKS = [
  'x-middleware-subrequest (CVE-2025-29927) does not take a request past the middleware limit',
  'an X-Forwarded-For entry with a port is the address it carries: rotating ports is one client',
  'an X-Forwarded-For entry that is not an address is answered 500 with one warning, not a stack trace per request',
  'withRateLimit on an Edge route handler warns that the default store counts per Edge instance',
  'a RedisStore over a TCP client built on the Edge runtime fails with a coded error naming the fix',
  'a route limiter behind the middleware limiter: the fields Next.js mixes are named by RATEWINDOW_MIXED_HEADERS',
  "a route limiter behind a middleware limiter with headers: false: one set of fields, the route's",
  'withRateLimit with concurrency 2 on a streaming route: a stream holds its slot until its body ends (10 ran at once)',
] as const

export function describeNextStartAttacks(app: NextStartApp): void {
  const [subrequest, port, garbage, edgeRoute, edgeStore, mixed, recipe, streams] = NEXT_START_ATTACKS

  it(subrequest, async () => {
    // The header Next.js before 15.2.3 took for its own recursion guard: middleware was skipped for it.
    const names = ['middleware', 'src/middleware', 'proxy', 'src/proxy']
    const sent: number[] = []
    for (const name of names)
      for (let call = 0; call < 2; call++) {
        const header = Array(5).fill(name).join(':')
        sent.push(
          (await get(app, '/api/limited', '203.0.113.60', { 'x-middleware-subrequest': header })).status,
        )
      }
    expect(sent).toEqual([200, 200, 200, 429, 429, 429, 429, 429])
  })

  it(port, async () => {
    const ipv4 = [1001, 1002, 1003, 1004].map((each) => `198.51.100.9, 203.0.113.61:${each}`)
    const sentIpv4: number[] = []
    for (const forwardedFor of ipv4) sentIpv4.push((await get(app, '/api/limited', forwardedFor)).status)
    expect(sentIpv4).toEqual([200, 200, 200, 429])
    // Without the port, the same client: its bucket is spent.
    expect((await get(app, '/api/limited', '203.0.113.61')).status).toBe(429)
    const sentIpv6: number[] = []
    for (const each of [443, 444, 445, 446])
      sentIpv6.push((await get(app, '/api/limited', `[2001:db8:61::1]:${each}`)).status)
    expect(sentIpv6).toEqual([200, 200, 200, 429])
  })

  it(garbage, async () => {
    const from = app.served().output().length
    expect(await statuses([1, 2, 3, 4, 5].map(() => get(app, '/api/limited', 'unknown')))).toEqual([
      500, 500, 500, 500, 500,
    ])
    await until(
      () => app.served().output().includes('RATEWINDOW_INVALID_ADDRESS'),
      'the invalid-address warning was printed',
    )
    // Once in the warning (or not at all when an earlier case warned), never once per request.
    expect(count(app.served().output(), 'Not an IP address', from)).toBeLessThanOrEqual(1)
  })

  it(edgeRoute, async () => {
    const from = app.served().output().length
    expect((await get(app, '/api/edge', '203.0.113.62')).status).toBe(200)
    await until(
      () => count(app.served().output(), 'RATEWINDOW_PER_ISOLATE_STORE', from) > 0,
      'the Edge route handler printed RATEWINDOW_PER_ISOLATE_STORE',
    )
  })

  it(edgeStore, async () => {
    const from = app.served().output().length
    expect((await get(app, '/api/edge-store', '203.0.113.64')).status).toBe(500)
    await until(
      () => app.served().output().slice(from).includes('ERR_RATEWINDOW_INVALID_OPTION'),
      () => `the coded error was printed (output: ${app.served().output().slice(from)})`,
    )
    const printed = app.served().output().slice(from)
    expect(printed).toContain('needs TCP sockets, which the Edge runtime does not have')
    expect(printed).toContain('proxy.ts')
  })

  it(mixed, async () => {
    expect(await statuses([0, 1].map(() => get(app, '/api/both', '203.0.113.63')))).toEqual([200, 200])
    const refused = await get(app, '/api/both', '203.0.113.63')
    expect(refused.status).toBe(429)
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0)
    await until(
      () => app.served().output().includes('RATEWINDOW_MIXED_HEADERS'),
      'the mixed-fields warning was printed',
    )
  })

  it(recipe, async () => {
    const first = await get(app, '/api/quiet', '203.0.113.65')
    expect([
      first.status,
      first.headers.get('ratelimit-limit'),
      first.headers.get('ratelimit-remaining'),
    ]).toEqual([200, '2', '1'])
    await get(app, '/api/quiet', '203.0.113.65')
    const refused = await get(app, '/api/quiet', '203.0.113.65')
    expect(refused.status).toBe(429)
    expect(refused.headers.get('ratelimit-policy')).toBe('2;w=60')
    expect(refused.headers.get('ratelimit-remaining')).toBe('0')
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0)
  })

  it(streams, async () => {
    const client = '203.0.113.66'
    const live: ReadableStreamDefaultReader<Uint8Array>[] = []
    /** A GET of the stream `id`: its status; an admitted one is kept open, its first line read. */
    const open = async (id: string) => {
      const response = await get(app, `/api/stream?id=${id}`, client)
      if (response.status !== 200) {
        await response.arrayBuffer()
        return response.status
      }
      const reader = response.body!.getReader()
      expect(new TextDecoder().decode((await reader.read()).value)).toContain('first')
      live.push(reader)
      return response.status
    }
    /** Ends the stream `id` (the route's POST) and reads it to its end. */
    const end = async (id: string, reader: ReadableStreamDefaultReader<Uint8Array>) => {
      expect((await fetch(`${app.served().url}/api/stream?id=${id}`, { method: 'POST' })).status).toBe(204)
      while (!(await reader.read()).done);
    }
    expect([await open('a'), await open('b')]).toEqual([200, 200])
    // Both streams run: the handler of each returned long ago, their slots are still taken.
    expect(await open('c')).toBe(429)
    // One ends: its slot is back.
    await end('a', live[0]!)
    await until(async () => (await open('d')) === 200, 'a stream was admitted once another ended', {
      every: 20,
    })
    // A client that leaves mid-stream: Next.js cancels the body, and its slot is back too.
    await live[1]!.cancel()
    await until(async () => (await open('e')) === 200, 'a stream was admitted once a client left', {
      every: 20,
    })
    expect(await open('f')).toBe(429)
    await end('d', live[2]!)
    await end('e', live[3]!)
  })
}
