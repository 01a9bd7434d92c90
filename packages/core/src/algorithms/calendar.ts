/**
 * Calendar periods for quota rules (issue 47; the rule builds on this): the day, week, month or year that holds an
 * instant, in an IANA time zone, counted from a billing anchor (the 17th of each month at 09:00 in `Europe/Paris`).
 *
 * Lua has no time-zone data: the deciding process computes a period's bounds here (Intl) and passes them to the
 * store, which keeps the period's end with the state, so processes whose tzdata differ adopt the stored boundary.
 *
 * The rules of a local time that is not one instant:
 * - an anchor on the 29th–31st falls on the month's last day in shorter months (and the 29th of February on the
 *   28th in common years);
 * - a local time that does not exist (the hour skipped when daylight-saving time starts) moves to the next valid
 *   instant: the moment the clocks jump;
 * - a local time that happens twice (the hour repeated when it ends) takes the first.
 */
import { invalid } from '../support/errors.js'

export type CalendarUnit = 'day' | 'week' | 'month' | 'year'

export const CALENDAR_UNITS: readonly CalendarUnit[] = ['day', 'week', 'month', 'year']

/** A period: from `start` (included) to `end` (excluded), epoch ms; `next`: where the period after it ends. */
export interface CalendarPeriod {
  readonly start: number
  readonly end: number
  readonly next: number
}

/** Where each period starts, as local fields (month 1–12; ISO weekday 1 Monday – 7 Sunday). */
export interface CalendarAnchor {
  /** The month a yearly period starts in. */
  month: number
  /** The day of the month a monthly or yearly period starts on. */
  day: number
  /** The day of the week a weekly period starts on. */
  weekday: number
  hour: number
  minute: number
  second: number
}

/** What `quota({ anchor })` accepts: a local date-time in the rule's time zone, or an instant. */
export type AnchorInput = string | Date | number

/** Periods start on the 1st of January, the 1st of the month, Monday and midnight unless anchored elsewhere. */
const CALENDAR_START: CalendarAnchor = { month: 1, day: 1, weekday: 1, hour: 0, minute: 0, second: 0 }

const DAY_MS = 86_400_000
const LOCAL_TIME = /^(\d{4})-(\d{2})-(\d{2})(?:T(\d{2}):(\d{2})(?::(\d{2}))?)?$/

/** Local wall-clock fields (month 1–12). */
interface Wall {
  year: number
  month: number
  day: number
  hour: number
  minute: number
  second: number
}

/**
 * One formatter per time zone, by its canonical name (what `resolvedOptions` says: `'Europe/Paris'` for
 * `'europe/paris'`): at most one per zone the runtime knows, however the names are spelled. Making one costs tens of
 * µs, reading with it a few.
 */
const formatters = new Map<string, Intl.DateTimeFormat>()

function makeFormatter(timeZone: string): Intl.DateTimeFormat {
  return new Intl.DateTimeFormat('en-US', {
    timeZone,
    hourCycle: 'h23',
    year: 'numeric',
    month: 'numeric',
    day: 'numeric',
    hour: 'numeric',
    minute: 'numeric',
    second: 'numeric',
  })
}

/** The formatter of a canonical zone name (`parseTimeZone`'s answer). */
function formatterOf(timeZone: string): Intl.DateTimeFormat {
  let formatter = formatters.get(timeZone)
  if (formatter === undefined) {
    formatter = makeFormatter(timeZone)
    formatters.set(formatter.resolvedOptions().timeZone, formatter)
  }
  return formatter
}

/**
 * `timeZone` checked: an IANA name this runtime knows (`'UTC'`, `'Europe/Paris'`), answered in its canonical
 * spelling, so that one zone spelled two ways is one calendar (one storage id, one count).
 */
export function parseTimeZone(value: unknown, option = 'timeZone'): string {
  const expected = "an IANA time zone this runtime knows, such as 'UTC' or 'Europe/Paris'"
  if (typeof value !== 'string' || value === '')
    throw invalid('ERR_RATEWINDOW_INVALID_OPTION', option, value, expected)
  if (formatters.has(value)) return value
  let canonical: string
  try {
    canonical = makeFormatter(value).resolvedOptions().timeZone
  } catch {
    throw invalid('ERR_RATEWINDOW_INVALID_OPTION', option, value, expected)
  }
  formatterOf(canonical)
  return canonical
}

/** The local fields of `instant` in `timeZone`, to the second. */
function wallOf(instant: number, timeZone: string): Wall {
  const wall: Wall = { year: 0, month: 0, day: 0, hour: 0, minute: 0, second: 0 }
  for (const part of formatterOf(timeZone).formatToParts(instant))
    if (part.type in wall) wall[part.type as keyof Wall] = Number(part.value)
  return wall
}

function utcOf(wall: Wall): number {
  return Date.UTC(wall.year, wall.month - 1, wall.day, wall.hour, wall.minute, wall.second)
}

/** How far `timeZone`'s clocks are ahead of UTC at `instant` (ms). */
function offsetAt(instant: number, timeZone: string): number {
  const whole = Math.floor(instant / 1000) * 1000
  return utcOf(wallOf(whole, timeZone)) - whole
}

/**
 * The instant the local time `wall` names in `timeZone`: the first of two in a repeated hour, and for a time the
 * clocks skip, the instant they jump.
 */
export function instantOf(wall: Wall, timeZone: string): number {
  const local = utcOf(wall)
  // A zone changes its offset at most once within a day each side (every zone in the IANA database since 1970).
  const earlier = offsetAt(local - DAY_MS, timeZone)
  const later = offsetAt(local + DAY_MS, timeZone)
  let first: number | undefined
  for (const candidate of [local - earlier, local - later])
    if (candidate + offsetAt(candidate, timeZone) === local && (first === undefined || candidate < first))
      first = candidate
  if (first !== undefined) return first
  // Skipped: the clocks jumped forward between `local - later` (before the jump) and `local - earlier` (after it).
  let before = local - later
  let after = local - earlier
  while (after - before > 1) {
    const middle = Math.floor((before + after) / 2)
    if (offsetAt(middle, timeZone) === later) after = middle
    else before = middle
  }
  return after
}

/** The date `days` after year-month-day, on the proleptic Gregorian calendar. */
function addDays(wall: Wall, days: number): Wall {
  const date = new Date(Date.UTC(wall.year, wall.month - 1, wall.day + days))
  return { ...wall, year: date.getUTCFullYear(), month: date.getUTCMonth() + 1, day: date.getUTCDate() }
}

function daysInMonth(year: number, month: number): number {
  return new Date(Date.UTC(year, month, 0)).getUTCDate()
}

/** ISO weekday of a date: 1 Monday – 7 Sunday. */
function weekdayOf(wall: Wall): number {
  return new Date(Date.UTC(wall.year, wall.month - 1, wall.day)).getUTCDay() || 7
}

/** `anchor` checked and read as local fields in `timeZone`; undefined: the calendar's own boundaries. */
export function parseAnchor(value: unknown, timeZone: string, option = 'anchor'): CalendarAnchor {
  if (value === undefined) return CALENDAR_START
  const expected = "a local date-time such as '2026-01-17T09:00' (read in `timeZone`), a Date, or epoch ms"
  let wall: Wall | undefined
  if (typeof value === 'string') {
    const match = LOCAL_TIME.exec(value)
    if (match !== null) {
      const [, year, month, day, hour = '0', minute = '0', second = '0'] = match
      wall = {
        year: Number(year),
        month: Number(month),
        day: Number(day),
        hour: Number(hour),
        minute: Number(minute),
        second: Number(second),
      }
      const valid =
        wall.month >= 1 &&
        wall.month <= 12 &&
        wall.day >= 1 &&
        wall.day <= daysInMonth(wall.year, wall.month) &&
        wall.hour <= 23 &&
        wall.minute <= 59 &&
        wall.second <= 59
      if (!valid) wall = undefined
    }
  } else {
    const instant = value instanceof Date ? value.getTime() : value
    if (typeof instant === 'number' && Number.isFinite(instant)) wall = wallOf(instant, timeZone)
  }
  if (wall === undefined) throw invalid('ERR_RATEWINDOW_INVALID_OPTION', option, value, expected)
  return {
    month: wall.month,
    day: wall.day,
    weekday: weekdayOf(wall),
    hour: wall.hour,
    minute: wall.minute,
    second: wall.second,
  }
}

/**
 * The periods of one quota rule: the one holding an instant (`at`), computed once per period (the last one is
 * kept: a decision inside it costs two comparisons).
 */
export class CalendarPeriods {
  readonly unit: CalendarUnit
  readonly timeZone: string
  readonly anchor: CalendarAnchor
  #last: CalendarPeriod = { start: 0, end: 0, next: 0 }

  constructor(unit: CalendarUnit, timeZone: string, anchor: CalendarAnchor) {
    this.unit = unit
    this.timeZone = timeZone
    this.anchor = anchor
  }

  /** The period holding `now` (epoch ms). */
  at(now: number): CalendarPeriod {
    const last = this.#last
    if (last.start <= now && now < last.end) return last
    this.#last = this.#periodAt(now)
    return this.#last
  }

  #periodAt(now: number): CalendarPeriod {
    const wall = wallOf(now, this.timeZone)
    // The boundary in the local period holding `now`, else the one before: never more than one step back.
    let step = this.#steps(wall)
    let start = this.#boundary(step)
    if (start > now) {
      step = this.#next(step, -1)
      start = this.#boundary(step)
    }
    const following = this.#next(step, 1)
    return { start, end: this.#boundary(following), next: this.#boundary(this.#next(following, 1)) }
  }

  /** The local date of the boundary in the calendar period that holds `wall`'s date. */
  #steps(wall: Wall): Wall {
    const { anchor } = this
    switch (this.unit) {
      case 'day':
        return wall
      case 'week':
        return addDays(wall, -((weekdayOf(wall) - anchor.weekday + 7) % 7))
      case 'month':
        return { ...wall, day: 1 }
      case 'year':
        return { ...wall, month: anchor.month, day: 1 }
    }
  }

  /** The boundary step `count` periods after `step` (a local date; the day is placed by `#boundary`). */
  #next(step: Wall, count: number): Wall {
    switch (this.unit) {
      case 'day':
        return addDays(step, count)
      case 'week':
        return addDays(step, 7 * count)
      case 'month': {
        const months = step.year * 12 + step.month - 1 + count
        return { ...step, year: Math.floor(months / 12), month: (months % 12) + 1 }
      }
      case 'year':
        return { ...step, year: step.year + count }
    }
  }

  /** The instant a period starts, its local date given by `step`. */
  #boundary(step: Wall): number {
    const { anchor } = this
    const day =
      this.unit === 'month' || this.unit === 'year'
        ? Math.min(anchor.day, daysInMonth(step.year, step.month))
        : step.day
    return instantOf(
      { ...step, day, hour: anchor.hour, minute: anchor.minute, second: anchor.second },
      this.timeZone,
    )
  }
}
