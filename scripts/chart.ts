/**
 * `pnpm demo -- --chart`: admitted and limited requests over time, per algorithm, drawn as an SVG from the
 * limiters' `onDecision` events (the same events `@ratewindow/otel` counts). The traffic is the demo's: a burst
 * across a window boundary, then steady traffic at twice the sustainable rate; the clock is simulated.
 */
import { type DecisionEvent, MemoryStore, RateLimiter } from '@ratewindow/core'
import { DEMO_RULES } from './simulation.js'

export interface ChartSeries {
  name: string
  /** Per bucket of `bucketMs` from `startMs`: requests admitted and limited. */
  buckets: { admitted: number; limited: number }[]
}

export const BUCKET_MS = 1_000
export const START_MS = 18_000
export const END_MS = 70_000

/** The demo's traffic: 20 requests within 1 s across the 20 s boundary, then 2 per second from 30 s to 70 s. */
export function demoTraffic(): number[] {
  return [
    ...Array.from({ length: 20 }, (_, i) => 19_500 + i * 50),
    ...Array.from({ length: 80 }, (_, i) => 30_000 + i * 500),
  ]
}

/** Runs the traffic through each algorithm and buckets its decision events by time. */
export async function chartSeries(times: readonly number[] = demoTraffic()): Promise<ChartSeries[]> {
  const series: ChartSeries[] = []
  for (const [name, make] of DEMO_RULES) {
    let now = 0
    const buckets = Array.from({ length: (END_MS - START_MS) / BUCKET_MS }, () => ({
      admitted: 0,
      limited: 0,
    }))
    const onDecision = (event: DecisionEvent) => {
      const bucket = buckets[Math.floor((event.result.at - START_MS) / BUCKET_MS)]
      if (bucket === undefined) return
      if (event.outcome === 'allowed') bucket.admitted++
      else bucket.limited++
    }
    const limiter = new RateLimiter({
      rules: make(),
      name,
      store: new MemoryStore({ clock: () => now }),
      observer: { onDecision },
    })
    for (const time of times) {
      now = time
      await limiter.limit('client')
    }
    series.push({ name, buckets })
  }
  return series
}

const escapeXml = (text: string) => text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;')

/** One panel per series: a stacked bar per bucket, admitted (green) under limited (red). */
export function chartSvg(series: readonly ChartSeries[], title: string): string {
  const barWidth = 12
  const panelHeight = 110
  const unit = 5 // px per request
  const left = 170
  const top = 50
  const width = left + (series[0]?.buckets.length ?? 0) * barWidth + 20
  const height = top + series.length * panelHeight + 40
  const parts: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif" font-size="12">`,
    `<rect width="${width}" height="${height}" fill="#ffffff"/>`,
    `<text x="10" y="22" font-size="15" font-weight="bold">${escapeXml(title)}</text>`,
    '<rect x="10" y="32" width="10" height="10" fill="#2e9d4f"/><text x="25" y="42">admitted</text>',
    '<rect x="95" y="32" width="10" height="10" fill="#d64541"/><text x="110" y="42">limited (429)</text>',
  ]
  series.forEach((one, row) => {
    const base = top + (row + 1) * panelHeight - 10
    parts.push(`<g data-series="${escapeXml(one.name)}">`)
    parts.push(`<text x="10" y="${base - 40}">${escapeXml(one.name)}</text>`)
    parts.push(`<line x1="${left}" y1="${base}" x2="${width - 20}" y2="${base}" stroke="#999"/>`)
    one.buckets.forEach((bucket, i) => {
      const x = left + i * barWidth
      const t = (START_MS + i * BUCKET_MS) / 1000
      if (bucket.admitted > 0) {
        const h = bucket.admitted * unit
        parts.push(
          `<rect x="${x}" y="${base - h}" width="${barWidth - 2}" height="${h}" fill="#2e9d4f" data-outcome="admitted" data-count="${bucket.admitted}" data-t="${t}"><title>${t} s: ${bucket.admitted} admitted</title></rect>`,
        )
      }
      if (bucket.limited > 0) {
        const h = bucket.limited * unit
        const y = base - bucket.admitted * unit - h
        parts.push(
          `<rect x="${x}" y="${y}" width="${barWidth - 2}" height="${h}" fill="#d64541" data-outcome="limited" data-count="${bucket.limited}" data-t="${t}"><title>${t} s: ${bucket.limited} limited</title></rect>`,
        )
      }
    })
    parts.push('</g>')
  })
  const axis = top + series.length * panelHeight + 5
  for (let i = 0; i <= (series[0]?.buckets.length ?? 0); i += 10) {
    parts.push(
      `<text x="${left + i * barWidth}" y="${axis + 12}" text-anchor="middle">${(START_MS + i * BUCKET_MS) / 1000} s</text>`,
    )
  }
  parts.push('</svg>')
  return `${parts.join('\n')}\n`
}
