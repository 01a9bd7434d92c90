/**
 * The grouped script's arguments and reply (issue 33): a plain call is sent as its key set alone, any other in
 * full, and the reply is read once, record by record. Its decisions are checked against Redis by the conformance
 * traces (every client, standalone and Cluster) and test/redis-grouping.test.ts.
 */
import { describe, expect, it } from 'vitest'
import { batchArguments, eachRecord } from '../../src/stores/redis/batch-script.js'
import { MODE } from '../../src/stores/redis/script.js'

const call = (base: string, mode: number = MODE.consume, now = -1, cost = 1, at = 0) => ({
  base,
  mode,
  now,
  at,
  request: { cost },
})

describe('batchArguments', () => {
  it('sends each key set once, a plain call as its set alone, and any other call in full', () => {
    const { keys, args } = batchArguments(
      [
        call('a:'),
        call('b:'),
        call('a:'),
        call('b:', MODE.refund, -1, 2, 1_700_000_000_000),
        call('c:', MODE.peek),
        call('a:', MODE.consume, 1_700_000_000_123),
      ],
      ['r1', 'pen'],
      ['10', '60000'],
    )
    expect(keys).toEqual(['a:r1', 'a:pen', 'b:r1', 'b:pen', 'c:r1', 'c:pen'])
    expect(args).toEqual([
      ...['6', '2', '2', '10', '60000'],
      '1',
      '2',
      '1',
      ...['-2', '2', '-1', '2', '1700000000000'],
      ...['-3', '1', '-1', '1', '0'],
      ...['-1', '0', '1700000000123', '1', '0'],
    ])
  })
})

describe('eachRecord', () => {
  const read = (reply: unknown[], calls: number) => {
    const records: unknown[][] = []
    const ok = eachRecord(reply, calls, (index, start, length) => {
      records[index] = reply.slice(start, start + length)
    })
    return ok ? records : false
  }

  it('reads one record per call, each preceded by its length', () => {
    expect(read([3, 1, 5, 0, 2, 1, 7], 2)).toEqual([
      [1, 5, 0],
      [1, 7],
    ])
  })

  it('refuses a reply that is short, long, or holds a length below 2', () => {
    expect(read([3, 1, 5, 0, 2, 1], 2)).toBe(false)
    expect(read([3, 1, 5, 0, 2, 1, 7, 9], 2)).toBe(false)
    expect(read([1, 1, 2, 1, 7], 2)).toBe(false)
    expect(read(['x'], 1)).toBe(false)
  })
})
