import { createRequire } from 'node:module'
import { resolve } from 'node:path'

// The app is built in <cache>/apps/<entry>, its dependencies installed in <cache>/node_modules: both roots there.
const root = resolve(import.meta.dirname, '..', '..')
const nextMajor = Number(createRequire(import.meta.url)('next/package.json').version.split('.')[0])

export default {
  outputFileTracingRoot: root,
  turbopack: { root },
  // NOTE: an app is built once for its inputs (next.test.ts builds it again from scratch when they change), so a
  // build cache would never be read: none is written (Next 15's webpack cache, over 100 MB a build; Next 16's
  // Turbopack cache, whose writing takes seconds).
  webpack: (config) => ({ ...config, cache: false }),
  ...(nextMajor >= 16 ? { experimental: { turbopackFileSystemCacheForBuild: false } } : {}),
}
