import { defineConfig } from 'tsup'
import { packageBuild } from '../../tsup.config.base.js'

// Three entries: the cost model and the binding on core's engine, the Envelop (Yoga) plugin, the Apollo plugin. The
// plugins are apart so that a Yoga project's declarations never name @apollo/server, nor an Apollo one's Envelop.
export default defineConfig({ ...packageBuild, entry: ['src/index.ts', 'src/envelop.ts', 'src/apollo.ts'] })
