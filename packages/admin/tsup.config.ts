import { defineConfig } from 'tsup'
import { packageBuild } from '../../tsup.config.base.js'

// One entry per framework, so that each mount needs only its own framework's package; the handler alone needs none.
export default defineConfig({
  ...packageBuild,
  entry: ['src/index.ts', 'src/express.ts', 'src/koa.ts', 'src/fastify.ts', 'src/hono.ts', 'src/nestjs.ts'],
})
