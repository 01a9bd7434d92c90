import { defineConfig } from 'tsup'
import { packageBuild } from '../../tsup.config.base.js'

// Four entries: the module, the storage for @nestjs/throttler (`@ratewindow/nestjs/throttler`), the GraphQL cost
// model's Mercurius hooks (`@ratewindow/nestjs/mercurius`, apart so that only its users need graphql) and the
// gateway guard (`@ratewindow/nestjs/websockets`, which alone needs @ratewindow/ws and @nestjs/websockets).
export default defineConfig({
  ...packageBuild,
  entry: ['src/index.ts', 'src/throttler.ts', 'src/mercurius.ts', 'src/websockets.ts'],
})
