/**
 * The Workers project's Worker in workerd: bundled from the installed tarballs as wrangler bundles it, run by
 * miniflare with no compatibility flag, and asked as a client and as an operator would.
 */
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { build as bundle } from 'esbuild'
import { Miniflare } from 'miniflare'
import { WORKERD_APP } from '../programs/cloudflare.js'

/** Asks the Worker: `path` with `method`, from one client address; answers `<status> <body>`. */
type Ask = (path?: string, method?: string) => Promise<string>

/**
 * Bundles WORKERD_APP in the project and asks it in workerd: 200, 200, 429, with no Node globals; then, from the
 * admin routes, an override raises the client's limit to 4 (200, 200, 429 again) and a block refuses it at once.
 */
export async function runInWorkerd(dir: string): Promise<void> {
  const mf = new Miniflare({
    modules: [{ type: 'ESModule', path: 'worker.js', contents: await bundleWorker(dir) }],
    compatibilityDate: '2025-09-01',
    compatibilityFlags: [],
    durableObjects: { RATE_LIMITER: { className: 'RateLimiterObject', useSQLite: true } },
  })
  const ask: Ask = async (path = '/', method = 'GET') => {
    const response = await mf.dispatchFetch(`http://worker.test${path}`, {
      method,
      headers: { 'CF-Connecting-IP': '203.0.113.7' },
    })
    return `${response.status} ${await response.text()}`
  }
  try {
    await expectLimited(ask)
    await expectOperated(ask)
  } finally {
    await mf.dispose()
  }
}

/** WORKERD_APP written into the project and bundled with its node_modules, as wrangler bundles a Worker. */
async function bundleWorker(dir: string): Promise<string> {
  writeFileSync(join(dir, 'workerd-app.mjs'), WORKERD_APP)
  const { outputFiles } = await bundle({
    entryPoints: [join(dir, 'workerd-app.mjs')],
    absWorkingDir: dir,
    bundle: true,
    format: 'esm',
    platform: 'neutral',
    conditions: ['workerd', 'worker', 'browser'],
    mainFields: ['browser', 'module', 'main'],
    external: ['cloudflare:*'],
    write: false,
    logLevel: 'silent',
  })
  return outputFiles[0]!.text
}

/** Limit 2: allowed twice (with no `process` global, in Cloudflare's runtime), then refused. */
async function expectLimited(ask: Ask): Promise<void> {
  const answers: string[] = []
  for (let i = 0; i < 3; i++) answers.push(await ask())
  if (
    answers[0] !== '200 undefined Cloudflare-Workers' ||
    answers[1]?.slice(0, 3) !== '200' ||
    answers[2]?.slice(0, 3) !== '429'
  )
    throw new Error(`answers ${JSON.stringify(answers)}`)
}

/** The client's key is its address. Raised to 4 with 2 used: two more, then refused; blocked: refused at once. */
async function expectOperated(ask: Ask): Promise<void> {
  const operated = [await ask('/admin/203.0.113.7/raise', 'POST')]
  for (let i = 0; i < 3; i++) operated.push((await ask()).slice(0, 3))
  operated.push((await ask('/admin/203.0.113.7/block', 'POST')).slice(0, 3), await ask())
  if (
    operated.slice(0, 5).join() !== '200 raised,200,200,429,200' ||
    !/^429 .*Blocked by an operator/.test(operated[5] ?? '')
  )
    throw new Error(`after the override and the block: ${JSON.stringify(operated)}`)
}
