/** The demo chart: drawn from decision events, one bar segment per second and outcome, counts that add up. */
import { describe, expect, it } from 'vitest'
import { chartSeries, chartSvg, demoTraffic, END_MS, START_MS } from '../scripts/chart.js'
import { DEMO_RULES, replay } from '../scripts/simulation.js'

/** The bar segments of one series, read back from the SVG text. */
function segments(svg: string, series: string): { outcome: string; count: number; t: number }[] {
  const group = new RegExp(`<g data-series="${series}">([\\s\\S]*?)</g>`).exec(svg)
  expect(group).not.toBeNull()
  return [...group![1]!.matchAll(/data-outcome="(\w+)" data-count="(\d+)" data-t="(\d+)"/g)].map((match) => ({
    outcome: match[1]!,
    count: Number(match[2]),
    t: Number(match[3]),
  }))
}

describe('pnpm demo -- --chart', () => {
  it('draws, per algorithm, what the limiter admitted and limited, second by second', async () => {
    const svg = chartSvg(await chartSeries(), 'test')
    expect(svg.startsWith('<svg xmlns="http://www.w3.org/2000/svg"')).toBe(true)
    const traffic = demoTraffic().filter((t) => t >= START_MS && t < END_MS)
    for (const [name, make] of DEMO_RULES) {
      const bars = segments(svg, name)
      const { admitted } = await replay(make(), demoTraffic())
      const sum = (outcome: string) =>
        bars.filter((bar) => bar.outcome === outcome).reduce((total, bar) => total + bar.count, 0)
      expect(sum('admitted')).toBe(admitted.length)
      expect(sum('admitted') + sum('limited')).toBe(traffic.length)
    }
    // The fixed window admits 10 on each side of the 20 s boundary: 20 in one second and a half.
    const fixed = segments(svg, 'fixed window')
    expect(fixed.filter((bar) => bar.t === 19 || bar.t === 20)).toEqual([
      { outcome: 'admitted', count: 10, t: 19 },
      { outcome: 'admitted', count: 10, t: 20 },
    ])
    // The sliding window log never admits more than 10 in the burst.
    const log = segments(svg, 'sliding window log')
    expect(
      log
        .filter((bar) => (bar.t === 19 || bar.t === 20) && bar.outcome === 'admitted')
        .map((bar) => bar.count),
    ).toEqual([10])
  })
})
