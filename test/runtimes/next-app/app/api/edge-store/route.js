// docs/next.md's first snippet, a RedisStore on a TCP client, on the Edge runtime. ioredis itself cannot even be
// imported there (it fails as the chunk loads, before any code of ours), so this client is a stand-in of its shape:
// what a TCP client that survives the Edge bundle meets when the store is built. Built per request, not at module
// load: `next build` evaluates route modules.
import { RedisStore } from '@ratewindow/next'

export const runtime = 'edge'
export const dynamic = 'force-dynamic'

const tcpClient = { evalsha() {}, defineCommand() {}, on() {}, status: 'wait' }

export function GET() {
  new RedisStore({ client: tcpClient })
  return new Response('built')
}
