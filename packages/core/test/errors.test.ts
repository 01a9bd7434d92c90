import { readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import { ERROR_CODES } from '../src/errors.js'

describe('docs/errors.md', () => {
  it('lists every error code of errors.ts, and no other, each with a fix', () => {
    const page = readFileSync(new URL('../../../docs/errors.md', import.meta.url), 'utf8')
    const rows = page.split('\n').filter((line) => line.startsWith('| `ERR_'))
    const documented = rows.map((line) => /^\| `(ERR_[A-Z_]+)`/.exec(line)![1])
    expect([...documented].sort()).toEqual([...ERROR_CODES].sort())
    for (const row of rows) expect(row.split('|').filter((cell) => cell.trim() !== '')).toHaveLength(3)
  })
})
