/**
 * A naive model of penalties, written from the definition in docs/policies.md and independent of the
 * library's code: it keeps every denial and every block and recomputes from them.
 */
export interface PenaltySpec {
  after: number
  within: number
  block: number
  factor: number
  maxBlock: number
}

export class PenaltyReference {
  /** Denials counted towards the next block: the times of the current counting period. */
  #denials: number[] = []
  /** Every block: start and length. */
  #blocks: { start: number; length: number }[] = []

  constructor(readonly spec: PenaltySpec) {}

  /** How long the key is blocked at `now` (0 when not). */
  blockedAt(now: number): number {
    const last = this.#blocks.at(-1)
    return last === undefined ? 0 : Math.max(0, last.start + last.length - now)
  }

  /** A denial by the rules at `now` (the key not blocked); returns the block it starts, or 0. */
  deny(now: number): number {
    // A counting period starts at its first denial and lasts `within`.
    if (this.#denials.length > 0 && (now - this.#denials[0]! >= this.spec.within || now < this.#denials[0]!))
      this.#denials = []
    this.#denials.push(now)
    if (this.#denials.length < this.spec.after) return 0
    this.#denials = []
    // The repeat count: consecutive blocks, each starting less than the previous one's length after it ended.
    let level = 1
    for (let i = this.#blocks.length - 1; i >= 0; i--) {
      const block = this.#blocks[i]!
      const end = block.start + block.length
      const next = i === this.#blocks.length - 1 ? now : this.#blocks[i + 1]!.start
      if (next >= end + block.length) break
      level++
    }
    const length = Math.min(this.spec.block * this.spec.factor ** (level - 1), this.spec.maxBlock)
    this.#blocks.push({ start: now, length })
    return length
  }

  /** Forgotten when the state expires: nothing counted and no block remembered. */
  expireIfIdle(now: number): void {
    const last = this.#blocks.at(-1)
    const counting = this.#denials.length > 0 && now - this.#denials[0]! < this.spec.within
    const remembered = last !== undefined && now < last.start + 2 * last.length
    if (!counting && !remembered) {
      this.#denials = []
      this.#blocks = []
    }
  }

  reset(): void {
    this.#denials = []
    this.#blocks = []
  }
}
