/** Options checked at construction (a clear error naming the option), and close reasons cut on a character. */
import { createServer } from 'node:http'
import { fixedWindow, RateLimitError } from '@ratewindow/core'
import { Server } from 'socket.io'
import { describe, expect, it } from 'vitest'
import { limitHonoWebSockets } from '../src/hono.js'
import { limitWebSockets, truncateUtf8 } from '../src/index.js'
import { limitSocketIo } from '../src/socket.io.js'

const encoded = (text: string) => new TextEncoder().encode(text).length

describe('options are checked at construction', () => {
  it.each([
    [{ onLimit: 'disconnect' }, 'onLimit', "'drop' or 'close'"],
    [{ maxPending: 0 }, 'maxPending', 'a whole number >= 1'],
    [{ maxUnreadRefusals: 0 }, 'maxUnreadRefusals', 'a whole number >= 1 such as 100'],
    [{ maxBufferedAmount: -1 }, 'maxBufferedAmount', 'a whole number >= 0 such as 65536'],
    [{ clock: 'performance' }, 'clock', 'a function'],
    [{ cost: 1.5 }, 'cost', 'a whole number >= 0'],
    [{ key: 'user' }, 'key', 'a function'],
    [{ clientIp: 'x-forwarded-for' }, 'clientIp', 'a function'],
    [{ upgrade: { limit: 30, key: () => 'k' } }, 'upgrade.key', 'a top-level option'],
    [{ upgrade: { limit: 30, concurrency: { limit: 2 } } }, 'upgrade.concurrency', 'an upgrade has none'],
  ])('%o: names `%s`', (options, option, allowed) => {
    const attempt = () => limitWebSockets(options as never)
    expect(attempt).toThrow(RateLimitError)
    expect(attempt).toThrow(allowed)
    expect(() => attempt()).toThrow(expect.objectContaining({ option }))
  })

  it('an unknown option is named, with the peer library name mapped to ours', () => {
    expect(() => limitWebSockets({ windowMs: 1000 } as never)).toThrow(
      expect.objectContaining({ code: 'ERR_RATEWINDOW_UNKNOWN_OPTION' }),
    )
  })

  it('the limiters check their own options at construction', () => {
    expect(() => limitWebSockets({ connections: { limit: 0 } })).toThrow(
      expect.objectContaining({ option: 'limit' }),
    )
    expect(() => limitWebSockets({ messagesPerKey: { rules: [] } })).toThrow(
      expect.objectContaining({ option: 'rules' }),
    )
    expect(() => limitWebSockets({ upgrade: { max: 5 } as never })).toThrow(/`max`/)
  })

  it.each([
    [{ maxNamespaces: 0 }, 'maxNamespaces', 'a whole number >= 1 such as 32'],
    [{ maxWriteBuffer: 1.5 }, 'maxWriteBuffer', 'a whole number >= 0 such as 64'],
    [{ socketKey: 'auth.user' }, 'socketKey', 'a function'],
    [{ errorEvent: '' }, 'errorEvent', 'a non-empty string'],
  ])('Socket.IO %o: names `%s`', (options, option, allowed) => {
    const attempt = () => limitSocketIo(new Server(createServer()), options as never)
    expect(attempt).toThrow(RateLimitError)
    expect(attempt).toThrow(allowed)
    expect(() => attempt()).toThrow(expect.objectContaining({ option }))
  })

  it('Hono needs a way to the client address: getConnInfo, clientIp or key', () => {
    expect(() => limitHonoWebSockets({})).toThrow(expect.objectContaining({ option: 'getConnInfo' }))
    expect(() => limitHonoWebSockets({ key: (c) => c.req.header('x-user') ?? '' })).not.toThrow()
    const rules = fixedWindow({ limit: 1, window: '1s' })
    expect(() =>
      limitHonoWebSockets({ clientIp: () => '203.0.113.7', messagesPerKey: { rules } }),
    ).not.toThrow()
  })
})

describe('close reasons: at most 123 bytes of UTF-8, cut on a character', () => {
  it('keeps a short reason as it is', () => {
    expect(truncateUtf8('rate limited')).toBe('rate limited')
  })

  it('cuts ASCII at 123 bytes', () => {
    expect(truncateUtf8('x'.repeat(200))).toBe('x'.repeat(123))
  })

  it('never cuts a character in two: 3-byte characters, and 4-byte ones (surrogate pairs)', () => {
    const threes = truncateUtf8('é'.repeat(10) + '€'.repeat(60))
    expect(encoded(threes)).toBeLessThanOrEqual(123)
    expect(threes).toBe('é'.repeat(10) + '€'.repeat(34)) // 20 + 102 = 122 bytes; one more € would be 125
    const emoji = truncateUtf8('a' + '😀'.repeat(40))
    expect(emoji).toBe('a' + '😀'.repeat(30)) // 1 + 120 bytes; half an emoji is never kept
    expect(encoded(emoji)).toBe(121)
  })
})
