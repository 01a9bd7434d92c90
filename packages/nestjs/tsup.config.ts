import { defineConfig } from 'tsup'
import { packageBuild } from '../../tsup.config.base.js'

// Two entries: the module, and the storage for @nestjs/throttler (`@ratewindow/nestjs/throttler`).
export default defineConfig({ ...packageBuild, entry: ['src/index.ts', 'src/throttler.ts'] })
