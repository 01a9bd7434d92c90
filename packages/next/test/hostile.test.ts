/**
 * Attacks on `@ratewindow/next`, each as the attacker sent it. Those that need a real Next.js server run in
 * test/runtimes/next.test.ts, on the apps it builds once and serves with `next start` (next-start-attacks.ts
 * registers them there); the rest run here.
 */
import { readFileSync } from 'node:fs'
import { describe, expect, it, vi } from 'vitest'
import { until } from '../../../test/support/connections.js'
import { NEXT_START_ATTACKS } from './next-start-attacks.js'

// Stubbed: no Next.js of the vulnerable releases is ever installed in this repository.
vi.mock('next/package.json', () => ({ default: { version: '15.2.2' } }))

const { rateLimit, withRateLimit } = await import('@ratewindow/next')
const { skipsMiddleware } = await import('../src/version.js')

describe('x-middleware-subrequest (CVE-2025-29927): middleware that a request can skip', () => {
  it('on Next.js 15.2.2, building the middleware limiter warns that any client can skip it', async () => {
    const warnings: { code?: string; message: string }[] = []
    const listener = (warning: Error & { code?: string }) => warnings.push(warning)
    process.on('warning', listener)
    try {
      rateLimit({ limit: 3, trustProxy: 1 })
      await until(
        () => warnings.some((warning) => warning.code === 'RATEWINDOW_SKIPPABLE_MIDDLEWARE'),
        'the warning was emitted',
      )
    } finally {
      process.off('warning', listener)
    }
    const [warning] = warnings.filter((each) => each.code === 'RATEWINDOW_SKIPPABLE_MIDDLEWARE')
    expect(warning!.message).toMatch(/Next\.js 15\.2\.2 .*x-middleware-subrequest.*CVE-2025-29927/)
    expect(warning!.message).toContain(
      '`withRateLimit` and `rateLimitAction`, which do not depend on middleware',
    )
    // A route handler's limiter does not depend on middleware: it does not warn.
    withRateLimit(() => new Response(), { trustProxy: 1 })
    expect(warnings.filter((each) => each.code === 'RATEWINDOW_SKIPPABLE_MIDDLEWARE')).toHaveLength(1)
  })

  it('the peer range admits no Next.js whose middleware a request can skip', () => {
    const manifest = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8'))
    const range: string = manifest.peerDependencies.next
    // Each alternative of the range is a caret range: its lowest version is the one to check.
    const lowest = range.split('||').map((each) => each.trim().replace(/^\^/, ''))
    expect(lowest.filter((version) => skipsMiddleware(version))).toEqual([])
    expect(['15.0.0', '15.2.2', '14.2.24', '13.5.8', '12.3.4', '11.1.4'].every(skipsMiddleware)).toBe(true)
    expect(['15.2.3', '15.5.29', '16.0.0', '14.2.25', '13.5.9', '12.3.5'].some(skipsMiddleware)).toBe(false)
  })
})

describe('under next start (test/runtimes/next.test.ts, every entry of its matrix, memory and Redis)', () => {
  it.each(NEXT_START_ATTACKS)('%s', (name) => {
    const runtime = readFileSync(new URL('../../../test/runtimes/next.test.ts', import.meta.url), 'utf8')
    expect(runtime).toContain('describeNextStartAttacks(')
    expect(name.length).toBeGreaterThan(0)
  })
})
