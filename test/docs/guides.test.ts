/**
 * The guides from the peer libraries (issue 32, item 16): one page per peer in docs/from, each checked by the
 * docs check like every other doc, each with a "before" block on the peer and an "after" block on ratewindow that
 * run or serve, reached from the "Coming from" part of its package README, and with links that lead somewhere.
 */
import { existsSync, readFileSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { describe, expect, it } from 'vitest'
import { docFiles, parseDoc, root, type Snippet } from './snippets.js'

/** Each peer, its guide, the package the "before" block imports, and the README that links to the guide. */
const GUIDES = [
  {
    page: 'docs/from/express-rate-limit.md',
    peer: 'express-rate-limit',
    readme: 'packages/express/README.md',
  },
  {
    page: 'docs/from/fastify-rate-limit.md',
    peer: '@fastify/rate-limit',
    readme: 'packages/fastify/README.md',
  },
  { page: 'docs/from/koa-ratelimit.md', peer: 'koa-ratelimit', readme: 'packages/koa/README.md' },
  { page: 'docs/from/nestjs-throttler.md', peer: '@nestjs/throttler', readme: 'packages/nestjs/README.md' },
  { page: 'docs/from/hono-rate-limiter.md', peer: 'hono-rate-limiter', readme: 'packages/hono/README.md' },
  { page: 'docs/from/elysia-rate-limit.md', peer: 'elysia-rate-limit', readme: 'packages/elysia/README.md' },
  {
    page: 'docs/from/rate-limiter-flexible.md',
    peer: 'rate-limiter-flexible',
    readme: 'packages/core/README.md',
  },
] as const

const imports = (snippet: Snippet, from: RegExp) =>
  [...snippet.code.matchAll(/from '([^']+)'/g)].some((match) => from.test(match[1]!))
/** Checked beyond typechecking: run, or started as a server. */
const executed = (snippet: Snippet) => snippet.run || snippet.serve !== undefined

describe('guides from the peer libraries', () => {
  it('has one page per peer, each among the docs the docs check reads', () => {
    const checked = new Set(docFiles())
    expect(GUIDES.filter(({ page }) => !existsSync(join(root, page)) || !checked.has(page))).toEqual([])
  })

  it.each(GUIDES)(
    '$page: a before block on $peer and an after block on ratewindow, both executed',
    (guide) => {
      const { snippets } = parseDoc(guide.page)
      const code = snippets.filter((snippet) => snippet.lang === 'ts' && !snippet.skip)
      const peer = new RegExp(`^${guide.peer.replace(/[/.]/g, '\\$&')}(/|$)`)
      expect(code.filter((snippet) => imports(snippet, peer) && executed(snippet)).length).toBeGreaterThan(0)
      expect(
        code.filter((snippet) => imports(snippet, /^@ratewindow\//) && executed(snippet)).length,
      ).toBeGreaterThan(0)
    },
  )

  it.each(GUIDES)('$readme links to $page', ({ readme, page }) => {
    const text = readFileSync(join(root, readme), 'utf8')
    const target = resolve(root, page)
    const links = [...text.matchAll(/\]\(([^)#\s]+)(?:#[^)]*)?\)/g)].map((match) =>
      resolve(root, dirname(readme), match[1]!),
    )
    expect(links).toContain(target)
  })

  it.each(GUIDES)('$page: every relative link leads to a file, and every anchor to a heading', ({ page }) => {
    const text = readFileSync(join(root, page), 'utf8')
    const broken: string[] = []
    for (const [, target] of text.matchAll(/\]\(([^)\s]+)\)/g)) {
      if (/^[a-z]+:/.test(target!)) continue
      const [path, anchor] = target!.split('#') as [string, string | undefined]
      const file = path === '' ? join(root, page) : resolve(root, dirname(page), path)
      if (!existsSync(file)) {
        broken.push(target!)
        continue
      }
      if (
        anchor !== undefined &&
        file.endsWith('.md') &&
        !headingAnchors(readFileSync(file, 'utf8')).has(anchor)
      )
        broken.push(target!)
    }
    expect(broken).toEqual([])
  })
})

/** The anchors GitHub gives a Markdown file's headings: lower case, punctuation dropped, spaces as hyphens. */
function headingAnchors(markdown: string): Set<string> {
  const anchors = new Set<string>()
  const seen = new Map<string, number>()
  let fenced = false
  for (const line of markdown.split('\n')) {
    if (line.startsWith('```')) fenced = !fenced
    const heading = !fenced && /^#{1,6}\s+(.*)$/.exec(line)
    if (!heading) continue
    const base = heading[1]!
      .trim()
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/\s/g, '-')
    const count = seen.get(base) ?? 0
    seen.set(base, count + 1)
    anchors.add(count === 0 ? base : `${base}-${count}`)
  }
  return anchors
}
