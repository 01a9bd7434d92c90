import { held } from '$lib/gate.js'

/** Two chunks: the first at once, the last once /api/release is asked for. */
export const GET = () => {
  let sent = 0
  const body = new ReadableStream({
    async pull(controller) {
      if (sent++ > 0) await held()
      if (sent > 2) return controller.close()
      controller.enqueue(new TextEncoder().encode(`chunk ${sent}\n`))
    },
  })
  return new Response(body, { headers: { 'content-type': 'text/plain' } })
}
