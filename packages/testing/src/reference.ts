import type { Rule } from '@ratewindow/core'

/**
 * A naive model of every algorithm, written from the definitions in DESIGN.md and independent of the
 * library's code: it keeps the full history of admitted requests and recomputes everything from it.
 * Waits are found by binary search over time (every algorithm's "fits" only gets easier as time passes
 * when nothing arrives), never by a formula.
 */
export interface Admission {
  time: number
  cost: number
  /**
   * Token bucket reservations only: units (1/interval token) the bucket gave up at the decision because it would
   * have refilled past its capacity before the reserved slot, or because another rule chose a later slot than the
   * bucket needed (it then keeps at most one millisecond of refill at the slot).
   */
  forfeit?: number
  /** GCRA reservations only: a reserved slot (at `time`), which takes the rule's room at it down to its last ms. */
  reserved?: boolean
  /**
   * GCRA and token bucket: not a request but a reserved slot given back (`giveBack`): the slot's time; `time` is
   * when it was given back and `cost` its units.
   */
  givenBack?: number
}

export interface ReferenceOutcome {
  allowed: boolean
  remaining: number[]
  reset: number[]
  retryAfter: number
}

function sumWhere(history: readonly Admission[], keep: (a: Admission) => boolean): number {
  let total = 0
  for (const admission of history) if (keep(admission)) total += admission.cost
  return total
}

/**
 * Token bucket level at `now`, in units of 1/interval token, by replaying the history. A slot given back returns
 * its tokens when nothing is owed, or when it is the last slot reserved: the level the bucket reaches at that slot
 * is within one millisecond of refill of empty, where a reservation leaves it (and a slot reserved after it takes
 * at least a token more). An earlier slot stays empty: one number cannot hold a gap.
 */
function tokensAt(rule: Rule, history: readonly Admission[], now: number): number {
  const [capacity, refillRate, interval] = rule.script.params
  const full = capacity * interval
  let tokens = full
  let last = history[0]?.time ?? now
  const until: Admission = { time: now, cost: 0 }
  for (const admission of [...history, until]) {
    const elapsed = Math.max(0, admission.time - last)
    tokens = Math.min(full, tokens + elapsed * refillRate)
    last = Math.max(last, admission.time)
    const slot = admission.givenBack
    if (slot === undefined) {
      tokens -= admission.cost * interval + (admission.forfeit ?? 0)
      continue
    }
    const level = tokens + (slot - admission.time) * refillRate
    const lastReserved = refillRate <= interval && level >= 0 && level < refillRate
    if (tokens >= 0 || lastReserved) tokens = Math.min(full, tokens + admission.cost * interval)
  }
  return tokens
}

/**
 * GCRA by virtual scheduling, replayed from the history: each admitted request moves the theoretical arrival
 * time to `max(tat, time) + cost × T`, with T = window / limit. Times are multiplied by the denominator of T
 * (the rule's first parameter) so that everything stays whole. A reserved slot also takes the room left at it,
 * down to its last millisecond. A slot given back moves the TAT back by its cost only while it is the last one
 * reserved: the TAT ends within the last millisecond of tolerance after it (a slot reserved after it ends one
 * interval later at least); an earlier one stays empty (one integer cannot hold a gap). Returns how far the TAT
 * is ahead of `now`.
 */
function gcraAheadAt(rule: Rule, history: readonly Admission[], now: number): number {
  const [scale, interval, burst] = rule.script.params
  const tolerance = burst * interval
  let tat = Number.NEGATIVE_INFINITY
  for (const admission of history) {
    const slot = admission.givenBack
    if (slot === undefined) {
      tat = Math.max(tat, admission.time * scale) + admission.cost * interval
      if (admission.reserved === true) tat = Math.max(tat, (admission.time - 1) * scale + tolerance + 1)
      continue
    }
    const lastReserved =
      interval >= scale && tat > (slot - 1) * scale + tolerance && tat <= slot * scale + tolerance
    if (tat - admission.time * scale > tolerance && lastReserved) tat -= admission.cost * interval
  }
  return Math.max(0, tat - now * scale)
}

/**
 * The fixed window's count at `now`: each window's units, plus what the windows before it counted beyond the limit
 * (a settle's debt), `limit` of which pass per window. Windows after `now`'s are not counted (a clock that stepped
 * back).
 */
function fixedWindowCount(rule: Rule, history: readonly Admission[], now: number): number {
  const { limit, windowMs: W } = rule
  const win = Math.floor(now / W)
  const perWindow = new Map<number, number>()
  for (const admission of history) {
    const w = Math.floor(admission.time / W)
    if (w <= win) perWindow.set(w, (perWindow.get(w) ?? 0) + admission.cost)
  }
  let count = 0
  let at = Number.NEGATIVE_INFINITY
  for (const w of [...perWindow.keys()].sort((a, b) => a - b)) {
    count = (at === Number.NEGATIVE_INFINITY ? 0 : Math.max(0, count - (w - at) * limit)) + perWindow.get(w)!
    at = w
  }
  return at === Number.NEGATIVE_INFINITY ? 0 : Math.max(0, count - (win - at) * limit)
}

/**
 * The units `rule` counts at `now` (`inspect`'s `used`): beyond its limit while it owes units. The sliding window
 * counter's estimate and the token bucket's and GCRA's units are rounded up.
 */
export function usedOf(rule: Rule, history: readonly Admission[], now: number): number {
  const W = rule.windowMs
  switch (rule.algorithm) {
    case 'fixed-window':
      return fixedWindowCount(rule, history, now)
    case 'sliding-window-log':
      return sumWhere(history, (a) => now - a.time < W)
    case 'sliding-window-counter': {
      const win = Math.floor(now / W)
      const curr = sumWhere(history, (a) => Math.floor(a.time / W) === win)
      const prev = sumWhere(history, (a) => Math.floor(a.time / W) === win - 1)
      return curr + Math.ceil((prev * (W - (now - win * W))) / W)
    }
    case 'token-bucket': {
      const [capacity, , interval] = rule.script.params
      return Math.ceil((capacity * interval - tokensAt(rule, history, now)) / interval)
    }
    case 'gcra':
      return Math.ceil(gcraAheadAt(rule, history, now) / rule.script.params[1])
    case 'quota':
      return quotaCount(rule, history, now)
  }
}

/**
 * A quota's units counted at `now`: those admitted in the period holding it (the rule's own calendar, whose
 * periods core's calendar tests pin down; a debt carried from the period before is not modelled).
 */
function quotaCount(rule: Rule, history: readonly Admission[], now: number): number {
  const periods = rule.periods!
  const end = periods.at(now).end
  return sumWhere(history, (a) => a.time <= now && periods.at(a.time).end === end)
}

/**
 * Whether a request of `cost` passes `rule` at `now`, given the admitted history. Every algorithm's "fits" is
 * linear in the cost: a charge that may leave the rule `d` units past its limit fits where `cost − d` does.
 */
export function fits(rule: Rule, history: readonly Admission[], now: number, cost: number): boolean {
  const { limit, windowMs: W } = rule
  switch (rule.algorithm) {
    case 'fixed-window':
      return fixedWindowCount(rule, history, now) + cost <= limit
    case 'sliding-window-log':
      return sumWhere(history, (a) => now - a.time < W) + cost <= limit
    case 'sliding-window-counter': {
      const win = Math.floor(now / W)
      const curr = sumWhere(history, (a) => Math.floor(a.time / W) === win)
      const prev = sumWhere(history, (a) => Math.floor(a.time / W) === win - 1)
      const elapsed = now - win * W
      return prev * (W - elapsed) + (curr + cost) * W <= limit * W
    }
    case 'token-bucket':
      return tokensAt(rule, history, now) >= cost * rule.script.params[2]
    case 'gcra': {
      const [, interval, burst] = rule.script.params
      return gcraAheadAt(rule, history, now) + cost * interval <= burst * interval
    }
    case 'quota':
      return quotaCount(rule, history, now) + cost <= limit
  }
}

/** How many cost-1 requests `rule` admits at `now`. */
export function remainingOf(rule: Rule, history: readonly Admission[], now: number): number {
  let k = 0
  while (k < rule.limit && fits(rule, history, now, k + 1)) k++
  return k
}

/** Smallest d >= from with pred(now + d), by binary search on a predicate monotone in d. */
function firstTrue(pred: (d: number) => boolean, from: number, upTo: number): number {
  let lo = from
  let hi = upTo
  if (!pred(hi)) throw new Error(`reference: predicate never turns true up to ${upTo} ms`)
  while (lo < hi) {
    const mid = Math.floor((lo + hi) / 2)
    if (pred(mid)) hi = mid
    else lo = mid + 1
  }
  return lo
}

/** The decision for a request of `cost` at `now` over all rules, and the history after it. */
export function decide(
  rules: readonly Rule[],
  histories: Admission[][],
  now: number,
  cost: number,
  write: boolean,
): ReferenceOutcome {
  const allowed = rules.every((rule, i) => fits(rule, histories[i]!, now, cost))
  // A peek reports the units free now: the request it asks about is not pending.
  const after = histories.map((history) => (allowed && write ? [...history, { time: now, cost }] : history))
  if (allowed && write)
    after.forEach((history, i) => {
      histories[i] = history
    })
  // A rule owing units (a settle's debt, up to a few limits) may need several windows to pass them.
  const horizon = 10 * Math.max(...rules.map((rule) => rule.windowMs)) + 1
  return {
    allowed,
    remaining: rules.map((rule, i) => remainingOf(rule, after[i]!, now)),
    reset: rules.map((rule, i) =>
      firstTrue((d) => remainingOf(rule, after[i]!, now + d) === rule.limit, 0, horizon),
    ),
    retryAfter: allowed
      ? 0
      : firstTrue((d) => rules.every((rule, i) => fits(rule, histories[i]!, now + d, cost)), 1, horizon),
  }
}

/**
 * The most units past its limit a charge (`Store.charge`) may leave `rule` owing at `now`: `maxDebt` (undefined: the
 * rule's limit), at most what the rule carries at its rate. The fixed window, the token bucket and GCRA carry any
 * debt; the sliding windows count a unit for one window, so they carry one limit. A store whose fixed window counts
 * keep two windows (`oneWindow`: SyncedStore) carries what one window counted beyond the limit into the next only:
 * one limit, and nothing while the window carries a debt from the one before.
 */
export function debtOf(
  rule: Rule,
  history: readonly Admission[],
  now: number,
  maxDebt: number | undefined,
  oneWindow: boolean,
): number {
  const debt = maxDebt ?? rule.limit
  switch (rule.algorithm) {
    case 'sliding-window-log':
    case 'sliding-window-counter':
      return Math.min(debt, rule.limit)
    case 'fixed-window': {
      if (!oneWindow) return debt
      const win = Math.floor(now / rule.windowMs)
      const counted = sumWhere(history, (a) => Math.floor(a.time / rule.windowMs) === win)
      const carried = fixedWindowCount(rule, history, now) - counted
      return carried > 0 ? 0 : Math.min(debt, rule.limit)
    }
    default:
      return debt
  }
}

/**
 * A charge of `cost` at `now` (`Store.charge`: a settle above its estimate, the operator's `take` with `maxDebt` 0):
 * the largest k <= cost that leaves no rule more than its debt (`debtOf`) past its limit, found by counting down.
 * Records k in every history and returns it.
 */
export function charge(
  rules: readonly Rule[],
  histories: Admission[][],
  now: number,
  cost: number,
  maxDebt: number | undefined,
  oneWindow = false,
): number {
  const debts = rules.map((rule, i) => debtOf(rule, histories[i]!, now, maxDebt, oneWindow))
  let k = cost
  while (k > 0 && !rules.every((rule, i) => fits(rule, histories[i]!, now, k - debts[i]!))) k--
  if (k > 0) for (const history of histories) history.push({ time: now, cost: k })
  return k
}

/** Reservation's answer in the reference: as `decide`, and `wait` (ms) > 0 when a slot was reserved. */
export interface ReferenceReservation extends ReferenceOutcome {
  wait: number
}

/**
 * Reservation (`StoreRequest.reserve`): a request over the limit that every rule admits within `reserve` ms is
 * charged for the earliest such time, found by binary search, never before the newest entry of a sliding window
 * log (first come, first served). The charge is recorded at the slot (GCRA, log), or at the decision for the
 * token bucket, less what the bucket would have refilled past its capacity before the slot. Beyond `reserve`,
 * or with an algorithm that cannot reserve (fixed window, counter), the request is decided as by `decide`.
 */
export function reserve(
  rules: readonly Rule[],
  histories: Admission[][],
  now: number,
  cost: number,
  reserve: number,
): ReferenceReservation {
  const reservable = rules.every(
    (rule) => !['fixed-window', 'sliding-window-counter'].includes(rule.algorithm),
  )
  const newest = Math.max(
    now,
    ...rules.flatMap((rule, i) =>
      rule.algorithm === 'sliding-window-log'
        ? histories[i]!.flatMap((admission) => (admission.cost > 0 ? [admission.time] : []))
        : [],
    ),
  )
  const passes = (d: number) =>
    now + d >= newest && rules.every((rule, i) => fits(rule, histories[i]!, now + d, cost))
  // Reserved slots (and the token bucket's debt) may reach far past a window: a binary search over a day.
  const horizon = 3 * Math.max(...rules.map((rule) => rule.windowMs)) + 86_400_000
  if (!reservable || !passes(reserve)) {
    const allowed = rules.every((rule, i) => fits(rule, histories[i]!, now, cost))
    if (!allowed) {
      const retryAfter = firstTrue(
        (d) => rules.every((rule, i) => fits(rule, histories[i]!, now + d, cost)),
        1,
        horizon,
      )
      return { ...outcome(rules, histories, now, horizon), allowed, retryAfter, wait: 0 }
    }
    // Admitted now: the log records it with its newest entry (it never unsorts).
    rules.forEach((rule, i) => {
      histories[i]!.push({ time: rule.algorithm === 'sliding-window-log' ? newest : now, cost })
    })
    return { ...outcome(rules, histories, now, horizon), allowed: true, retryAfter: 0, wait: 0 }
  }
  const wait = firstTrue(passes, 0, reserve)
  rules.forEach((rule, i) => {
    const history = histories[i]!
    // A wait of 0 is an admission now, not a reservation.
    if (rule.algorithm === 'gcra') history.push({ time: now + wait, cost, reserved: wait > 0 })
    else if (rule.algorithm !== 'token-bucket') history.push({ time: now + wait, cost })
    else {
      const [capacity, refillRate, interval] = rule.script.params
      const refill = wait * refillRate
      const most =
        wait > 0
          ? Math.min(capacity * interval - refill, refillRate - 1 - refill + cost * interval)
          : capacity * interval
      history.push({ time: now, cost, forfeit: Math.max(0, tokensAt(rule, history, now) - most) })
    }
  })
  return { ...outcome(rules, histories, now, horizon), allowed: true, retryAfter: 0, wait }
}

/**
 * A reserved slot still ahead given back at `now` (an abort while waiting): the request reserved for the slot at
 * `at` with `cost`. Never two calls on one slot: the sliding window log removes its entries at the slot; GCRA and
 * the token bucket keep one number per key, which cannot hold a gap, and give the slot back only while it is the
 * last one reserved (see `gcraAheadAt`, `tokensAt`), else it stays empty.
 */
export function giveBack(
  rules: readonly Rule[],
  histories: Admission[][],
  now: number,
  cost: number,
  at: number,
): void {
  rules.forEach((rule, i) => {
    const history = histories[i]!
    if (rule.algorithm !== 'sliding-window-log') {
      history.push({ time: now, cost, givenBack: at })
      return
    }
    let left = cost
    for (let j = history.length - 1; j >= 0 && left > 0; j--) {
      const admission = history[j]!
      if (admission.time !== at) continue
      const taken = Math.min(left, admission.cost)
      admission.cost -= taken
      left -= taken
    }
  })
}

function outcome(rules: readonly Rule[], histories: Admission[][], now: number, horizon: number) {
  return {
    remaining: rules.map((rule, i) => remainingOf(rule, histories[i]!, now)),
    reset: rules.map((rule, i) =>
      firstTrue((d) => remainingOf(rule, histories[i]!, now + d) === rule.limit, 0, horizon),
    ),
  }
}
