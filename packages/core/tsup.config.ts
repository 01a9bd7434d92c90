import { defineConfig } from 'tsup'
import { packageBuild } from '../../tsup.config.base.js'

// The root entry and the kits for package authors (`@ratewindow/core/adapter`, `/remote`, `/stored`, `/support`).
// Core keeps module state (the default-store marker, call bindings, close listeners, Redis groups) and
// `RateLimitError` is checked with `instanceof`, so every entry must share one copy of the code: `splitting`
// puts what entries share in chunks, in the CommonJS build too (tsup splits only ESM unless told).
export default defineConfig({
  ...packageBuild,
  entry: {
    index: 'src/index.ts',
    adapter: 'src/entries/adapter.ts',
    remote: 'src/entries/remote.ts',
    stored: 'src/entries/stored.ts',
    support: 'src/entries/support.ts',
  },
  splitting: true,
})
