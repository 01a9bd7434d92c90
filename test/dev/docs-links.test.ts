import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'

const root = join(import.meta.dirname, '../..')
const readmes = [
  'README.md',
  ...readdirSync(join(root, 'packages')).map((name) => `packages/${name}/README.md`),
]

describe('docs/testing.md', () => {
  it.each(readmes)('is linked from %s', (readme) => {
    expect(readFileSync(join(root, readme), 'utf8')).toMatch(/\]\((\.\.\/\.\.\/)?docs\/testing\.md[#)]/)
  })
})
