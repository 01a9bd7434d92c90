import { defineConfig } from 'tsup'
import { packageBuild } from '../../tsup.config.base.js'

// Three entries: the module, the storage for @nestjs/throttler (`@ratewindow/nestjs/throttler`), and the GraphQL
// cost model's Mercurius hooks (`@ratewindow/nestjs/mercurius`, apart so that only its users need graphql).
export default defineConfig({
  ...packageBuild,
  entry: ['src/index.ts', 'src/throttler.ts', 'src/mercurius.ts'],
})
