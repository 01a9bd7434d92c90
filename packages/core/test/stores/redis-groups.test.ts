import { afterEach, describe, expect, it, vi } from 'vitest'
import { isShed, LateReply } from '../../src/stores/call-bound.js'
import { type Entry, RedisGroups } from '../../src/stores/redis/groups.js'
import { RateLimitError } from '../../src/support/errors.js'

/** A send whose calls are answered by the test: each call's entries, and how to answer it. */
function controlledSend() {
  const calls: { payloads: string[]; answer: () => void; fail: (error: unknown) => void }[] = []
  const send = (entries: readonly Entry<string, string>[]) =>
    new Promise<string[]>((resolve, reject) => {
      const payloads = entries.map((entry) => entry.payload)
      calls.push({ payloads, answer: () => resolve(payloads.map((p) => `${p}!`)), fail: reject })
    })
  return { calls, send }
}

const settle = () => new Promise((resolve) => setImmediate(resolve))

/** The timers of the moment (faked by the test): RedisGroups waits on real ones unless given these. */
const currentTimers = () => ({
  now: () => performance.now(),
  setTimeout: (callback: () => void, ms: number) => setTimeout(callback, ms),
  clearTimeout: (timer: unknown) => clearTimeout(timer as NodeJS.Timeout),
  setImmediate: (callback: () => void) => void setImmediate(callback),
})

afterEach(() => {
  vi.useRealTimers()
})

describe('RedisGroups', () => {
  it('sends at once when nothing is in flight; what arrives meanwhile goes together at the end of the turn, in order', async () => {
    const { calls, send } = controlledSend()
    const groups = new RedisGroups(send)
    const first = groups.submit('n', 'script', 'a', undefined)
    expect(calls.map((call) => call.payloads)).toEqual([['a']])
    const waiting = ['b', 'c', 'd'].map((p) => groups.submit('n', 'script', p, undefined))
    // Another node is not held up by this one.
    const other = groups.submit('m', 'script', 'x', undefined)
    expect(calls.map((call) => call.payloads)).toEqual([['a'], ['x']])
    // The end of this turn of the event loop: what waited for 'n' goes in one call, 'a' still in flight.
    await settle()
    expect(calls.map((call) => call.payloads)).toEqual([['a'], ['x'], ['b', 'c', 'd']])
    calls[2]!.answer()
    expect(await Promise.all(waiting)).toEqual(['b!', 'c!', 'd!'])
    calls[0]!.answer()
    expect(await first).toBe('a!')
    calls[1]!.answer()
    expect(await other).toBe('x!')
    expect(groups.stats).toMatchObject({ flights: 3, calls: 3, entries: 5, shed: 0, peakWaiting: 3 })
  })

  it('with maxFlights in flight, what arrives waits for the oldest to be answered, and keeps its order', async () => {
    const { calls, send } = controlledSend()
    const groups = new RedisGroups(send, { maxFlights: 2, timers: currentTimers() })
    const all = [groups.submit('n', 's', 'a', undefined)]
    all.push(groups.submit('n', 's', 'b', undefined))
    await settle()
    all.push(groups.submit('n', 's', 'c', undefined), groups.submit('n', 's', 'd', undefined))
    await settle()
    // Two flights in flight: 'c' and 'd' wait.
    expect(calls.map((call) => call.payloads)).toEqual([['a'], ['b']])
    calls[0]!.answer()
    // Its answer (a promise turn), then the flush at the end of that turn.
    await settle()
    await settle()
    expect(calls.map((call) => call.payloads)).toEqual([['a'], ['b'], ['c', 'd']])
    calls[1]!.answer()
    calls[2]!.answer()
    expect(await Promise.all(all)).toEqual(['a!', 'b!', 'c!', 'd!'])
  })

  it('one flight carries one call per batch (script and slot), each at most maxGroup long', async () => {
    const { calls, send } = controlledSend()
    const groups = new RedisGroups(send, { maxGroup: 2 })
    void groups.submit('n', 's1', 'a', undefined)
    const rest = [
      ['s1', 'b'],
      ['s2', 'c'],
      ['s1', 'd'],
      ['s1', 'e'],
    ].map(([batch, p]) => groups.submit('n', batch!, p!, undefined))
    calls[0]!.answer()
    await settle()
    expect(calls.slice(1).map((call) => call.payloads)).toEqual([['b', 'd'], ['c'], ['e']])
    for (const call of calls.slice(1)) call.answer()
    expect(await Promise.all(rest)).toEqual(['b!', 'c!', 'd!', 'e!'])
  })

  it('a flight of several calls goes through `together` once; one call, or a `together` that throws, still sends each once', async () => {
    const { calls, send } = controlledSend()
    const wrapped: string[][] = []
    let failing = false
    const groups = new RedisGroups(send, {
      together: (first, sendAll) => {
        const before = calls.length
        if (failing) throw new Error('client trouble')
        sendAll()
        wrapped.push([first, ...calls.slice(before).map((call) => call.payloads.join())])
      },
    })
    void groups.submit('n', 's1', 'a', undefined)
    const rest = [groups.submit('n', 's1', 'b', undefined), groups.submit('n', 's2', 'c', undefined)]
    await settle()
    expect(wrapped).toEqual([['b', 'b', 'c']])
    failing = true
    const more = [groups.submit('n', 's1', 'd', undefined), groups.submit('n', 's2', 'e', undefined)]
    await settle()
    expect(calls.map((call) => call.payloads)).toEqual([['a'], ['b'], ['c'], ['d'], ['e']])
    for (const call of calls) call.answer()
    expect(await Promise.all([...rest, ...more])).toEqual(['b!', 'c!', 'd!', 'e!'])
  })

  it('a flight that times out answers every flight in flight and every waiting entry at once, with one error', async () => {
    // `performance` too: the groups' own sending work is measured on it, and on a loaded machine a real
    // millisecond of it would be owed back to the flight's clock (flight-clock.ts), moving the expiry.
    vi.useFakeTimers({
      toFake: ['setTimeout', 'clearTimeout', 'setImmediate', 'clearImmediate', 'performance'],
    })
    const { calls, send } = controlledSend()
    const groups = new RedisGroups(send, { maxFlights: 2, timers: currentTimers() })
    const late = new LateReply<string>()
    const sent = groups.submit('n', 's', 'a', { timeoutMs: 100, late })
    const second = groups.submit('n', 's', 'b', { timeoutMs: 100 })
    await vi.advanceTimersByTimeAsync(0)
    const waiting = groups.submit('n', 's', 'c', { timeoutMs: 100 })
    const errors = Promise.all([sent, second, waiting].map((each) => each.catch((error: unknown) => error)))
    // The clock starts once the sending work is done (an immediate), and an expiry is checked after the next
    // read of sockets (another immediate): answered at 100 ms (the fake clock runs the
    // immediate of 100 ms on its next step), not before.
    let answered = false
    void errors.then(() => {
      answered = true
    })
    await vi.advanceTimersByTimeAsync(98)
    expect(answered).toBe(false)
    await vi.advanceTimersByTimeAsync(3)
    expect(answered).toBe(true)
    const [first, ...rest] = await errors
    expect(first).toMatchObject({ code: 'ERR_RATEWINDOW_STORE_TIMEOUT' })
    // One error object for all three: the breaker counts one failure.
    expect(rest).toEqual([first, first])
    // The waiting entry (past maxFlights) was never sent; the node is free again, and the next call goes at once.
    expect(calls.map((call) => call.payloads)).toEqual([['a'], ['b']])
    void groups.submit('n', 's', 'd', { timeoutMs: 100 })
    expect(calls.map((call) => call.payloads)).toEqual([['a'], ['b'], ['d']])
    // The reply of the timed-out call reaches its late hook.
    calls[0]!.answer()
    expect(await late).toBe('a!')
  })

  it('each answered call of a flight restarts the clock for the next: a large flight is not a slow server', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setImmediate', 'clearImmediate'] })
    const { calls, send } = controlledSend()
    const groups = new RedisGroups(send, { maxGroup: 1, timers: currentTimers() })
    const within = { timeoutMs: 100 }
    void groups.submit('n', 's', 'a', within)
    const flight = ['b', 'c', 'd'].map((p) =>
      groups.submit('n', 's', p, within).catch((error: unknown) => error),
    )
    calls[0]!.answer()
    await vi.advanceTimersByTimeAsync(0)
    expect(calls.slice(1).map((call) => call.payloads)).toEqual([['b'], ['c'], ['d']])
    await vi.advanceTimersByTimeAsync(80)
    calls[1]!.answer()
    await vi.advanceTimersByTimeAsync(80)
    calls[2]!.answer()
    // 160 ms since the flight was sent, 80 since the last answer: still waiting for 'd', not timed out.
    await vi.advanceTimersByTimeAsync(90)
    calls[3]!.answer()
    expect(await Promise.all(flight)).toEqual(['b!', 'c!', 'd!'])
    // No answer for 100 ms does time out.
    const stalled = groups.submit('n', 's', 'e', within).catch((error: unknown) => error)
    await vi.advanceTimersByTimeAsync(102)
    expect(await stalled).toMatchObject({ code: 'ERR_RATEWINDOW_STORE_TIMEOUT' })
  })

  it('an answer from the node restarts the clock of every flight in flight to it: waiting behind our own earlier flight is not a timeout (issue 32)', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setImmediate', 'clearImmediate'] })
    const { calls, send } = controlledSend()
    const groups = new RedisGroups(send, { maxFlights: 2, timers: currentTimers() })
    const within = { timeoutMs: 100 }
    const first = groups.submit('n', 's', 'a', within)
    await vi.advanceTimersByTimeAsync(0)
    const second = groups.submit('n', 's', 'b', within).catch((error: unknown) => error)
    await vi.advanceTimersByTimeAsync(0)
    expect(calls.map((call) => call.payloads)).toEqual([['a'], ['b']])
    // The node answers 'a' at 80 ms and 'b' (behind it on the connection) 90 ms later: 170 ms after 'b' was sent,
    // but never 100 ms without an answer from the node.
    await vi.advanceTimersByTimeAsync(80)
    calls[0]!.answer()
    expect(await first).toBe('a!')
    await vi.advanceTimersByTimeAsync(90)
    calls[1]!.answer()
    expect(await second).toBe('b!')
  })

  it('time spent sending a later flight is our own work: it is given back to the clocks of the calls already sent (issue 32)', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setImmediate', 'clearImmediate'] })
    const { calls, send } = controlledSend()
    // The clock our own work is measured on: the test moves it as a send would take time (a flood's thousands
    // of calls built in one go, 300 ms).
    let now = 0
    const timers = { ...currentTimers(), now: () => now }
    const slowSend = (entries: readonly Entry<string, string>[]) => {
      if (entries[0]!.payload === 'big') now += 300
      return send(entries)
    }
    const groups = new RedisGroups(slowSend, { timers })
    const within = { timeoutMs: 100 }
    const first = groups.submit('n', 's', 'a', within).catch((error: unknown) => error)
    await vi.advanceTimersByTimeAsync(0)
    const big = groups.submit('m', 's', 'big', within).catch((error: unknown) => error)
    // 'a' was sent, but the client had not written it before the process spent 300 ms on 'big' (node-redis writes
    // a turn later; an ioredis Cluster connects to a node at its first command): 'a' is answered after 150 ms.
    await vi.advanceTimersByTimeAsync(50)
    calls[1]!.answer()
    expect(await big).toBe('big!')
    await vi.advanceTimersByTimeAsync(100)
    calls[0]!.answer()
    expect(await first).toBe('a!')
    // Without our own work in between, 100 ms of silence is a timeout.
    const stalled = groups.submit('n', 's', 'c', within).catch((error: unknown) => error)
    await vi.advanceTimersByTimeAsync(102)
    expect(await stalled).toMatchObject({ code: 'ERR_RATEWINDOW_STORE_TIMEOUT' })
  })

  it('at most maxPending decisions in flight to a node: the rest waits unsent, without a clock, and goes as the node answers, in order (issue 32)', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setImmediate', 'clearImmediate'] })
    const { calls, send } = controlledSend()
    const groups = new RedisGroups(send, { maxGroup: 2, maxPending: 3, timers: currentTimers() })
    const within = { timeoutMs: 100 }
    const all = ['a', 'b', 'c', 'd', 'e', 'f'].map((p) => groups.submit('n', 's', p, within))
    await vi.advanceTimersByTimeAsync(0)
    // 'a' went alone; of the rest, one call of two fits beside it, the others wait in our queue.
    expect(calls.map((call) => call.payloads)).toEqual([['a'], ['b', 'c']])
    // Longer than the timeout in all: nothing waiting in our queue times out, and the node's answers keep the calls
    // in flight alive. Two decisions are still in flight once 'a' is answered: 'd' and 'e' do not fit beside them.
    await vi.advanceTimersByTimeAsync(90)
    calls[0]!.answer()
    await vi.advanceTimersByTimeAsync(90)
    expect(calls.map((call) => call.payloads)).toEqual([['a'], ['b', 'c']])
    calls[1]!.answer()
    await vi.advanceTimersByTimeAsync(90)
    expect(calls.map((call) => call.payloads)).toEqual([['a'], ['b', 'c'], ['d', 'e'], ['f']])
    calls[2]!.answer()
    calls[3]!.answer()
    expect(await Promise.all(all)).toEqual(['a!', 'b!', 'c!', 'd!', 'e!', 'f!'])
  })

  it('at most maxCalls calls in flight on the client, all nodes together: the others wait unsent until calls end (GLIDE refuses past its limit)', async () => {
    const { calls, send } = controlledSend()
    const groups = new RedisGroups(send, { maxCalls: 2 })
    const first = groups.submit('n', 's', 'a', undefined)
    const second = groups.submit('m', 's', 'b', undefined)
    const third = groups.submit('o', 's', 'c', undefined)
    await settle()
    expect(calls.map((call) => call.payloads)).toEqual([['a'], ['b']])
    calls[1]!.answer()
    expect(await second).toBe('b!')
    await settle()
    expect(calls.map((call) => call.payloads)).toEqual([['a'], ['b'], ['c']])
    calls[0]!.answer()
    calls[2]!.answer()
    expect(await Promise.all([first, third])).toEqual(['a!', 'c!'])
  })

  it("a server failure fails the other flights and the waiting entries too; a key's own error fails only its call", async () => {
    const { calls, send } = controlledSend()
    const groups = new RedisGroups(send)
    const first = groups.submit('n', 's', 'a', undefined).catch((error: unknown) => error)
    const inFlight = groups.submit('n', 's', 'b', undefined).catch((error: unknown) => error)
    await settle()
    const waiting = groups.submit('n', 's', 'b2', undefined).catch((error: unknown) => error)
    const down = new Error('connect ECONNREFUSED')
    calls[1]!.fail(down)
    expect(await first).toBe(down)
    expect(await inFlight).toBe(down)
    expect(await waiting).toBe(down)
    // The other flight's own failure, when it comes, finds its entries answered.
    calls[0]!.fail(new Error('connection closed'))
    await settle()
    const keyError = new Error('ERR user_script:1: attempt to compare nil with number')
    const second = groups.submit('n', 's', 'c', undefined).catch((error: unknown) => error)
    const behind = groups.submit('n', 's', 'd', undefined)
    await settle()
    expect(calls.slice(2).map((call) => call.payloads)).toEqual([['c'], ['d']])
    calls[2]!.fail(keyError)
    expect(await second).toBe(keyError)
    calls[3]!.answer()
    expect(await behind).toBe('d!')
  })

  it('sheds past maxWaiting, with the last round trip as the wait, and sends nothing for it', async () => {
    const { calls, send } = controlledSend()
    const groups = new RedisGroups(send)
    void groups.submit('n', 's', 'a', undefined)
    const queued = groups.submit('n', 's', 'b', undefined, 1)
    const shed = await groups.submit('n', 's', 'c', undefined, 1).catch((error: unknown) => error)
    expect(isShed(shed)).toBe(true)
    expect(shed).toBeInstanceOf(RateLimitError)
    expect((shed as { retryAfterMs: number }).retryAfterMs).toBeGreaterThanOrEqual(1)
    calls[0]!.answer()
    await settle()
    expect(calls.map((call) => call.payloads)).toEqual([['a'], ['b']])
    calls[1]!.answer()
    expect(await queued).toBe('b!')
    expect(groups.stats.shed).toBe(1)
  })
})
