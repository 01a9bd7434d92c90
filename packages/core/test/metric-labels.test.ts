/** Issue 35: the label caps of the metrics packages, written once in core. */
import { describe, expect, it } from 'vitest'
import { MetricLabels, OTHER_LABEL_VALUE } from '../src/entries/support.js'

describe('MetricLabels', () => {
  it('keeps the first maxValues distinct values of each label, then counts the rest as other', () => {
    const labels = new MetricLabels(2)
    expect(['a', 'b', 'c', 'a'].map((name) => labels.limiter(name))).toEqual([
      'a',
      'b',
      OTHER_LABEL_VALUE,
      'a',
    ])
    expect(['r1', 'r2', 'r3'].map((rule) => labels.rule('a', rule))).toEqual(['r1', 'r2', 'other'])
    expect(['/x', '/y', '/z'].map((route) => labels.route('a', route))).toEqual(['/x', '/y', 'other'])
  })

  it('caps rules and routes per limiter, not across limiters', () => {
    const labels = new MetricLabels(1)
    expect(labels.rule('a', 'r1')).toBe('r1')
    expect(labels.rule('b', 'r2')).toBe('r2')
    expect(labels.route('a', '/x')).toBe('/x')
    expect(labels.route('a', '/y')).toBe('other')
  })

  it('refuses a cap that is not a positive whole number, naming the option', () => {
    expect(() => new MetricLabels(0)).toThrow(/`maxLabelValues`/)
    expect(() => new MetricLabels(1.5, 'labels')).toThrow(/`labels`/)
  })
})
