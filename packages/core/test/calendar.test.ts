import { describe, expect, it } from 'vitest'
import { CalendarPeriods, type CalendarUnit, parseAnchor, parseTimeZone } from '../src/algorithms/calendar.js'

const at = (iso: string) => Date.parse(iso)
const iso = (ms: number) => new Date(ms).toISOString()
const periods = (unit: CalendarUnit, timeZone = 'UTC', anchor?: string | Date | number) =>
  new CalendarPeriods(unit, parseTimeZone(timeZone), parseAnchor(anchor, timeZone))
const periodOf = (of: CalendarPeriods, now: string) => {
  const { start, end } = of.at(at(now))
  return [iso(start), iso(end)]
}

describe('calendar periods', () => {
  it('follow the calendar by default: midnight, Monday, the 1st, the 1st of January (UTC)', () => {
    expect(periodOf(periods('day'), '2026-12-07T15:00:00Z')).toEqual([
      '2026-12-07T00:00:00.000Z',
      '2026-12-08T00:00:00.000Z',
    ])
    // 2026-12-06 is a Sunday: its week began on Monday the 30th of November.
    expect(periodOf(periods('week'), '2026-12-06T23:59:59Z')).toEqual([
      '2026-11-30T00:00:00.000Z',
      '2026-12-07T00:00:00.000Z',
    ])
    expect(periodOf(periods('month'), '2026-02-15T12:00:00Z')).toEqual([
      '2026-02-01T00:00:00.000Z',
      '2026-03-01T00:00:00.000Z',
    ])
    expect(periodOf(periods('year'), '2026-12-31T23:59:59.999Z')).toEqual([
      '2026-01-01T00:00:00.000Z',
      '2027-01-01T00:00:00.000Z',
    ])
  })

  it('a billing anchor: the 17th of each month at 09:00 in Europe/Paris, across the change to summer time', () => {
    const billing = periods('month', 'Europe/Paris', '2026-01-17T09:00')
    // 09:00 in Paris is 08:00 UTC in winter and 07:00 UTC in summer (from the 29th of March 2026).
    expect(periodOf(billing, '2026-03-20T12:00:00Z')).toEqual([
      '2026-03-17T08:00:00.000Z',
      '2026-04-17T07:00:00.000Z',
    ])
    // Before 09:00 on the 17th: still the period that began on the 17th of the month before.
    expect(periodOf(billing, '2026-04-17T06:59:59.999Z')).toEqual([
      '2026-03-17T08:00:00.000Z',
      '2026-04-17T07:00:00.000Z',
    ])
    expect(periodOf(billing, '2026-04-17T07:00:00Z')[0]).toBe('2026-04-17T07:00:00.000Z')
  })

  it('an anchor on the 31st falls on the last day of shorter months, the 29th of February in leap years only', () => {
    const monthly = periods('month', 'UTC', '2026-01-31')
    expect(periodOf(monthly, '2026-02-10T00:00:00Z')).toEqual([
      '2026-01-31T00:00:00.000Z',
      '2026-02-28T00:00:00.000Z',
    ])
    expect(periodOf(monthly, '2026-03-01T00:00:00Z')).toEqual([
      '2026-02-28T00:00:00.000Z',
      '2026-03-31T00:00:00.000Z',
    ])
    expect(periodOf(monthly, '2026-04-30T00:00:00Z')).toEqual([
      '2026-04-30T00:00:00.000Z',
      '2026-05-31T00:00:00.000Z',
    ])
    expect(periodOf(monthly, '2028-02-29T12:00:00Z')[0]).toBe('2028-02-29T00:00:00.000Z')
    const yearly = periods('year', 'UTC', '2024-02-29T00:00')
    expect(periodOf(yearly, '2025-06-01T00:00:00Z')).toEqual([
      '2025-02-28T00:00:00.000Z',
      '2026-02-28T00:00:00.000Z',
    ])
    expect(periodOf(yearly, '2028-03-01T00:00:00Z')[0]).toBe('2028-02-29T00:00:00.000Z')
  })

  it('a local time the clocks skip moves to the instant they jump; one they repeat takes the first', () => {
    // New York, 8 March 2026: 02:00 EST becomes 03:00 EDT, so 02:30 does not exist.
    const skipped = periods('day', 'America/New_York', '2026-01-01T02:30')
    expect(periodOf(skipped, '2026-03-08T12:00:00Z')).toEqual([
      '2026-03-08T07:00:00.000Z', // 03:00 EDT, the jump
      '2026-03-09T06:30:00.000Z', // 02:30 EDT
    ])
    // 1 November 2026: 02:00 EDT becomes 01:00 EST, so 01:30 happens twice.
    const repeated = periods('day', 'America/New_York', '2026-01-01T01:30')
    expect(periodOf(repeated, '2026-11-01T12:00:00Z')).toEqual([
      '2026-11-01T05:30:00.000Z', // the first 01:30, EDT
      '2026-11-02T06:30:00.000Z', // 01:30 EST
    ])
    // The second 01:15 (EST) is after the first 01:30: inside the period that began then.
    expect(periodOf(repeated, '2026-11-01T06:15:00Z')[0]).toBe('2026-11-01T05:30:00.000Z')
  })

  it('days are as long as the calendar says: 23 and 25 hours on the days Paris changes its clocks', () => {
    const daily = periods('day', 'Europe/Paris')
    const [start, end] = periodOf(daily, '2026-03-29T12:00:00Z').map(Date.parse) as [number, number]
    expect((end - start) / 3_600_000).toBe(23)
    const [autumnStart, autumnEnd] = periodOf(daily, '2026-10-25T12:00:00Z').map(Date.parse) as [
      number,
      number,
    ]
    expect((autumnEnd - autumnStart) / 3_600_000).toBe(25)
  })

  it('an instant as anchor is read in the rule’s time zone (a subscription’s start)', () => {
    // 2026-05-31T23:30Z is the 1st of June, 01:30, in Paris.
    const monthly = periods('month', 'Europe/Paris', new Date('2026-05-31T23:30:00Z'))
    expect(periodOf(monthly, '2026-07-15T00:00:00Z')).toEqual([
      '2026-06-30T23:30:00.000Z',
      '2026-07-31T23:30:00.000Z',
    ])
    expect(periods('week', 'UTC', Date.parse('2026-12-09T00:00:00Z')).anchor.weekday).toBe(3)
  })

  it('periods tile time: hour by hour over two years in five zones, each period ends where the next starts', () => {
    const zones = ['UTC', 'Europe/Paris', 'America/New_York', 'Australia/Lord_Howe', 'Asia/Kathmandu']
    const units: CalendarUnit[] = ['day', 'week', 'month', 'year']
    for (const zone of zones)
      for (const unit of units) {
        const of = periods(unit, zone, '2024-01-31T02:30')
        let previous = of.at(at('2025-01-01T00:00:00Z'))
        for (let now = at('2025-01-01T00:00:00Z'); now < at('2027-01-01T00:00:00Z'); now += 3_600_000) {
          const period = of.at(now)
          if (!(period.start <= now && now < period.end))
            throw new Error(`${zone} ${unit}: ${iso(now)} outside its period`)
          if (period !== previous && period.start !== previous.end)
            throw new Error(
              `${zone} ${unit}: the period before ${iso(period.start)} ended at ${iso(previous.end)}`,
            )
          previous = period
        }
      }
  })

  it('the period in force is kept: a decision inside it computes nothing', () => {
    const monthly = periods('month')
    expect(monthly.at(at('2026-12-07T00:00:00Z'))).toBe(monthly.at(at('2026-12-20T00:00:00Z')))
  })

  it.each([
    ['timeZone', () => parseTimeZone('Mars/Olympus')],
    ['timeZone', () => parseTimeZone('')],
    ['anchor', () => parseAnchor('2026-02-30', 'UTC')],
    ['anchor', () => parseAnchor('17th at 9', 'UTC')],
    ['anchor', () => parseAnchor(Number.NaN, 'UTC')],
  ])('a bad `%s` is refused with the option named', (option, parse) => {
    expect(parse).toThrow(expect.objectContaining({ code: 'ERR_RATEWINDOW_INVALID_OPTION', option }))
  })
})

// Attack round (F4): one zone spelled two ways was two calendars (two storage ids, two counts) and two formatters
// kept for good.
describe('zone names', () => {
  it('are read in their canonical spelling', () => {
    expect(parseTimeZone('europe/PARIS')).toBe('Europe/Paris')
    expect(parseTimeZone('Etc/UTC')).toBe('UTC')
  })
})
