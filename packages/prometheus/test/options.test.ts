/** Issue 35, item 3: the options of prometheusMetrics(), checked at the call; one observer per registry. */
import { fixedWindow, RateLimitError, RateLimiter } from '@ratewindow/core'
import { Registry } from 'prom-client'
import { describe, expect, it } from 'vitest'
import { prometheusMetrics } from '../src/index.js'

describe('prometheusMetrics() options', () => {
  it('refuses an unknown option, a bad maxLabelValues and a registry that is not an object, naming them', () => {
    expect(() => prometheusMetrics({ registry: new Registry(), maxLabelValue: 5 } as never)).toThrow(
      /maxLabelValue/,
    )
    expect(() => prometheusMetrics({ registry: new Registry(), maxLabelValues: 0 })).toThrow(RateLimitError)
    expect(() => prometheusMetrics({ registry: new Registry(), maxLabelValues: 0 })).toThrow(
      /`maxLabelValues`/,
    )
    expect(() => prometheusMetrics({ registry: 'default' as never })).toThrow(/`registry`/)
  })

  it('returns the same observer for the same registry, so that its metrics are registered once', () => {
    const registry = new Registry()
    expect(prometheusMetrics({ registry })).toBe(prometheusMetrics({ registry }))
    expect(prometheusMetrics({ registry: new Registry() })).not.toBe(prometheusMetrics({ registry }))
  })

  it('registers again on a registry cleared since', async () => {
    const registry = new Registry()
    const first = prometheusMetrics({ registry })
    registry.clear()
    const second = prometheusMetrics({ registry })
    expect(second).not.toBe(first)
    expect(await registry.metrics()).toContain('# TYPE ratewindow_decisions_total counter')
  })

  it('caps rule names at maxLabelValues per limiter, then counts them as other; no route gives route=""', async () => {
    const registry = new Registry()
    const observer = prometheusMetrics({ registry, maxLabelValues: 1 })
    for (const name of ['first', 'second']) {
      const limiter = new RateLimiter({
        rules: fixedWindow({ limit: 5, window: '1m', name }),
        name: 'api',
        observer,
      })
      await limiter.limit('k')
    }
    const text = await registry.metrics()
    expect(text).toContain(
      'ratewindow_decisions_total{limiter="api",rule="first",outcome="allowed",route="",plan=""} 1',
    )
    expect(text).toContain(
      'ratewindow_decisions_total{limiter="api",rule="other",outcome="allowed",route="",plan=""} 1',
    )
  })
})
