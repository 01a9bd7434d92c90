/** A clock the test drives by hand: stores read `clock.now` through `clock.read`. */
export class ManualClock {
  constructor(public now = 1_700_000_000_000) {}
  readonly read = (): number => this.now
  set(now: number): this {
    this.now = now
    return this
  }
  advance(ms: number): this {
    this.now += ms
    return this
  }
}
