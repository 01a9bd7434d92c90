/**
 * The README's two commands (issue 20, item 11): a fresh machine has Node and npm only, so each line installs the
 * pnpm pinned in package.json itself, and nothing has to be run before them.
 */
import { readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'

const root = new URL('../../', import.meta.url)
const readme = readFileSync(new URL('README.md', root), 'utf8')
const pinned = (JSON.parse(readFileSync(new URL('package.json', root), 'utf8')) as { packageManager: string })
  .packageManager

describe('README: the two commands', () => {
  it('each line installs the pinned pnpm, then runs the demo or every check', () => {
    const section = readme.split('## The two commands')[1]!
    const block = /```sh\n([\s\S]*?)```/.exec(section)![1]!
    const lines = block
      .trim()
      .split('\n')
      .map((line) => line.replace(/\s+#.*$/, ''))
    expect(pinned).toMatch(/^pnpm@\d+\.\d+\.\d+$/)
    expect(lines).toEqual([
      `npm install -g ${pinned} && pnpm install && pnpm demo`,
      `npm install -g ${pinned} && pnpm install && pnpm test:all`,
    ])
    // Nothing to run first: the section opens with the two lines.
    expect(section.trimStart().startsWith('```sh')).toBe(true)
  })
})
