import { defineConfig } from 'tsup'
import { packageBuild } from '../../tsup.config.base.js'

// The library (`run`, the JSON shapes) and the `ratewindow` binary (`dist/bin.js`, its shebang kept by tsup).
export default defineConfig({ ...packageBuild, entry: ['src/index.ts', 'src/bin.ts'] })
