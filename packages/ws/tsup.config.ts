import { defineConfig } from 'tsup'
import { packageBuild } from '../../tsup.config.base.js'

// One entry per server, so that each needs only its own server's package: `ws` (and @fastify/websocket),
// `@ratewindow/ws/socket.io`, `@ratewindow/ws/hono`; and the engine alone (`@ratewindow/ws/engine`), for
// bindings elsewhere (the NestJS gateway guard), which needs none.
export default defineConfig({
  ...packageBuild,
  entry: ['src/index.ts', 'src/socket.io.ts', 'src/hono.ts', 'src/engine-entry.ts'],
})
