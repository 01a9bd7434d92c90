/** Small helpers for benchmarks: medians of repeated rounds, aligned tables. */

/** The value after `--name` on the command line, if given. */
export function argument(name: string): string | undefined {
  const index = process.argv.indexOf(`--${name}`)
  return index > 0 ? process.argv[index + 1] : undefined
}

export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = Math.floor(sorted.length / 2)
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2
}

/** Runs `round` `rounds` times (after one warm-up) and returns the median operations per second. */
export async function opsPerSecond(
  rounds: number,
  operations: number,
  round: () => Promise<void>,
): Promise<number> {
  await round()
  const rates: number[] = []
  for (let i = 0; i < rounds; i++) {
    const start = process.hrtime.bigint()
    await round()
    const seconds = Number(process.hrtime.bigint() - start) / 1e9
    rates.push(operations / seconds)
  }
  return median(rates)
}

export function table(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = header.map((cell, i) => Math.max(cell.length, ...rows.map((row) => row[i]!.length)))
  const line = (cells: readonly string[]) =>
    `| ${cells.map((cell, i) => cell.padEnd(widths[i]!)).join(' | ')} |`
  return [line(header), `|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`, ...rows.map(line)].join('\n')
}

export const formatRate = (rate: number): string => Math.round(rate).toLocaleString('en-US')
