import { readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import { ALGORITHMS } from '../src/algorithms/index.js'
import { HttpRateLimiter } from '../src/http/engine.js'
import { HEADER_FORMATS } from '../src/http/headers.js'
import { RateLimiter } from '../src/limiter/limiter.js'
import { ERROR_CODES, explanationOf, RateLimitError } from '../src/support/errors.js'
import { WARNING_CODES } from '../src/support/runtime.js'

const ALGORITHM_NAMES = Object.keys(ALGORITHMS)

describe('docs/errors.md', () => {
  const page = readFileSync(new URL('../../../docs/errors.md', import.meta.url), 'utf8')
  /** The table rows of one kind of code: `ERR_` for errors, `RATEWINDOW_` for warnings. */
  const rowsOf = (prefix: string) =>
    page.split('\n').filter((line) => new RegExp(`^\\| <a id="[a-z-]+"></a>\`${prefix}`).test(line))
  const codeOf = (row: string) => /`((?:ERR_)?RATEWINDOW_[A-Z_]+)`/.exec(row)![1]!

  it('lists every error code of errors.ts, and no other, each with a fix and its own anchor', () => {
    const rows = rowsOf('ERR_')
    expect(rows.map(codeOf).sort()).toEqual([...ERROR_CODES].sort())
    for (const row of rows) {
      expect(row.split('|').filter((cell) => cell.trim() !== '')).toHaveLength(3)
      expect(row).toContain(`<a id="${explanationOf(codeOf(row)).split('#')[1]}"></a>`)
    }
  })

  it('lists every warning code of runtime.ts, and no other, each with what to do and its own anchor', () => {
    const rows = rowsOf('RATEWINDOW_')
    expect(rows.map(codeOf).sort()).toEqual([...WARNING_CODES].sort())
    for (const row of rows) {
      expect(row.split('|').filter((cell) => cell.trim() !== '')).toHaveLength(3)
      expect(row).toContain(`<a id="${explanationOf(codeOf(row)).split('#')[1]}"></a>`)
    }
  })

  it('every error and warning ends with the link to its anchor', () => {
    const error = new RateLimitError('ERR_RATEWINDOW_INVALID_LIMIT', 'bad.')
    expect(error.message).toBe(
      'bad. See https://github.com/ratewindow/ratewindow/blob/main/docs/errors.md#err-ratewindow-invalid-limit',
    )
    expect(() => new RateLimiter({ limit: 0 } as never)).toThrow(/ See https:\S+#err-ratewindow-\S+$/)
  })
})

describe('docs that drifted (issue 20)', () => {
  const read = (path: string) => readFileSync(new URL(path, import.meta.url), 'utf8')

  it('the core README lists every error code', () => {
    const readme = read('../README.md')
    const codes = readme.slice(readme.indexOf('Codes: '))
    for (const code of ERROR_CODES) expect(codes).toContain(code.replace('ERR_RATEWINDOW', ''))
  })

  it('the core package description and docs/errors.md name every algorithm', () => {
    const description = (JSON.parse(read('../package.json')) as { description: string }).description
    const errors = read('../../../docs/errors.md')
    const row = errors.split('\n').find((line) => line.includes('`ERR_RATEWINDOW_INVALID_ALGORITHM`'))!
    for (const name of ALGORITHM_NAMES) {
      expect(row).toContain(`'${name}'`)
      expect(description.toLowerCase()).toContain(name === 'gcra' ? 'gcra' : name.replaceAll('-', ' '))
    }
  })

  it("the peers' header option names point at every format", () => {
    const error = (() => {
      try {
        new HttpRateLimiter({ standardHeaders: 'draft-7' } as never, {
          name: 'x',
          clientIp: () => '',
          untrustedForwardedFor: () => undefined,
          trustProxyHint: '',
        })
      } catch (caught) {
        return caught as Error
      }
      throw new Error('expected an error')
    })()
    for (const format of HEADER_FORMATS) expect(error.message).toContain(`'${format}'`)
  })
})
