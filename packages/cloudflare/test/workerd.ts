/**
 * RateLimiterObject in workerd through miniflare (no compatibility flag), for the test files that run the store
 * against it: the object bundled from the package's sources as wrangler bundles a Worker, SQLite-backed as the
 * README's migration creates it. One instance per test file.
 */
import { build } from 'esbuild'
import { Miniflare } from 'miniflare'
import { COMPATIBILITY_DATE } from '../../../test/runtimes/workerd-support.js'

/** The Worker module by default: the object re-exported, as the README says. */
const WORKER = `export { RateLimiterObject } from '@ratewindow/cloudflare'
export default { fetch: () => new Response('ok') }`

/**
 * Starts workerd with `worker` (a module that exports the Durable Object class `className`) bound as
 * `RATE_LIMITER`: the namespace binding miniflare hands out, and `dispose`.
 */
export async function startWorkerd(worker = WORKER, className = 'RateLimiterObject') {
  const bundle = await build({
    stdin: { contents: worker, resolveDir: import.meta.dirname, loader: 'ts' },
    bundle: true,
    format: 'esm',
    platform: 'neutral',
    target: 'es2022',
    conditions: ['@ratewindow/source', 'workerd', 'worker', 'browser'],
    mainFields: ['browser', 'module', 'main'],
    write: false,
    logLevel: 'silent',
  })
  const mf = new Miniflare({
    modules: [{ type: 'ESModule', path: 'worker.js', contents: bundle.outputFiles[0]!.text }],
    compatibilityDate: COMPATIBILITY_DATE,
    compatibilityFlags: [],
    durableObjects: { RATE_LIMITER: { className, useSQLite: true } },
  })
  // biome-ignore lint/suspicious/noExplicitAny: miniflare's proxy of the binding.
  const namespace: any = await mf.getDurableObjectNamespace('RATE_LIMITER')
  return { namespace, dispose: () => mf.dispose() }
}
