import { readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import { ALGORITHMS } from '../src/algorithms/index.js'
import { HttpRateLimiter } from '../src/http/engine.js'
import { HEADER_FORMATS } from '../src/http/headers.js'
import { ERROR_CODES } from '../src/support/errors.js'

const ALGORITHM_NAMES = Object.keys(ALGORITHMS)

describe('docs/errors.md', () => {
  it('lists every error code of errors.ts, and no other, each with a fix', () => {
    const page = readFileSync(new URL('../../../docs/errors.md', import.meta.url), 'utf8')
    const rows = page.split('\n').filter((line) => line.startsWith('| `ERR_'))
    const documented = rows.map((line) => /^\| `(ERR_[A-Z_]+)`/.exec(line)![1])
    expect([...documented].sort()).toEqual([...ERROR_CODES].sort())
    for (const row of rows) expect(row.split('|').filter((cell) => cell.trim() !== '')).toHaveLength(3)
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
    const row = errors.split('\n').find((line) => line.startsWith('| `ERR_RATEWINDOW_INVALID_ALGORITHM`'))!
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
