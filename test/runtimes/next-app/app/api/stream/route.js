// docs/next.md's route with `concurrency` (at most two of a client's requests at once), answering with a stream,
// as a model's answer is: the stream sends its first line at once, and its last when a POST of its `id` comes.
import { withRateLimit } from '@ratewindow/next'
import { storeFromEnv } from '../../../lib/store.js'

export const dynamic = 'force-dynamic'

const encoder = new TextEncoder()
/** The streams open now, by the `id` of their request: each ends when a POST names it. */
const open = new Map()

export const GET = withRateLimit(
  (request) => {
    const id = new URL(request.url).searchParams.get('id') ?? ''
    const body = new ReadableStream({
      start(controller) {
        controller.enqueue(encoder.encode('first\n'))
        open.set(id, () => {
          controller.enqueue(encoder.encode('last\n'))
          controller.close()
        })
      },
      cancel() {
        open.delete(id)
      },
    })
    return new Response(body, { headers: { 'content-type': 'text/plain' } })
  },
  { limit: 1_000, window: '1m', trustProxy: 1, concurrency: { limit: 2 }, ...storeFromEnv('stream') },
)

/** Ends the stream of `?id=`: 204, or 404 when none is open under it. */
export function POST(request) {
  const id = new URL(request.url).searchParams.get('id') ?? ''
  const end = open.get(id)
  open.delete(id)
  end?.()
  return new Response(null, { status: end === undefined ? 404 : 204 })
}
