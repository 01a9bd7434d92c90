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
  experimental: {
    // One process where the build allows it: webpack compiles in the build's own process, not a worker of its own,
    // and one worker collects the page data. Measured on this app (2 cores): Next 15 42.6 → 29.5 CPU s a build,
    // Next 16 18.7 → 16.5; the suite builds four.
    webpackBuildWorker: false,
    cpus: 1,
    ...(nextMajor >= 16 ? { turbopackFileSystemCacheForBuild: false } : {}),
  },
}
