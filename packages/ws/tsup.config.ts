import { defineConfig } from 'tsup'
import { packageBuild } from '../../tsup.config.base.js'

// Three entries, one per server, so that each needs only its own server's package: `ws` (and
// @fastify/websocket), `@ratewindow/ws/socket.io`, `@ratewindow/ws/hono`.
export default defineConfig({ ...packageBuild, entry: ['src/index.ts', 'src/socket.io.ts', 'src/hono.ts'] })
