/** The docs check's own parsing: annotations, requests, shown values, pnpm commands. */
import { describe, expect, it } from 'vitest'
import { parseSteps, pnpmScripts, runnableSource, type Snippet } from './snippets.js'

const snippet = (code: string): Snippet => ({
  at: 'doc.md:2',
  doc: 'doc.md',
  line: 2,
  lang: 'ts',
  code,
  prelude: '',
  run: true,
})

describe('serve steps', () => {
  it('reads repetitions, arrows and headers', () => {
    expect(
      parseSteps('GET / ×3 → 200; POST /login x2 -> 429 with Retry-After, RateLimit-Policy', 'doc.md:1'),
    ).toEqual([
      { method: 'GET', path: '/', times: 3, status: 200, headers: [] },
      { method: 'POST', path: '/login', times: 2, status: 429, headers: ['Retry-After', 'RateLimit-Policy'] },
    ])
  })

  it('refuses a step it cannot read, naming where it stands', () => {
    expect(() => parseSteps('GET / gives 200', 'doc.md:7')).toThrow(
      /doc\.md:7: cannot read the request "GET \/ gives 200"/,
    )
  })
})

describe('values shown in run blocks', () => {
  it('turns `expression // literal` into an assertion, and leaves prose comments alone', () => {
    const { source, assertions } = runnableSource(
      snippet("ipKey('::ffff:1.2.3.4') // '1.2.3.4'\nrateLimitHeaders(result) // draft-6: RateLimit-*"),
    )
    expect(assertions).toBe(1)
    expect(source).toContain(`__shows("doc.md:2", ipKey('::ffff:1.2.3.4'), '1.2.3.4')`)
    expect(source).toContain('rateLimitHeaders(result) // draft-6')
  })

  it('turns an object comment under `const name =` into a field check, `...` standing for the rest', () => {
    const { source, assertions } = runnableSource(
      snippet('const result = await limiter.limit(key)\n// { allowed: true, remaining: 99, ... } (ms)'),
    )
    expect(assertions).toBe(1)
    expect(source).toContain('__has("result", result, { allowed: true, remaining: 99 })')
  })
})

describe('pnpm commands', () => {
  it('finds scripts, with their --filter package, and skips pnpm builtins and env assignments', () => {
    expect(
      pnpmScripts(
        'pnpm install && REDIS_URL=x pnpm --filter @ratewindow/example-redis start & # comment pnpm nope',
      ),
    ).toEqual([['@ratewindow/example-redis', 'start']])
    expect(pnpmScripts('pnpm run test:all')).toEqual([[undefined, 'test:all']])
  })
})
