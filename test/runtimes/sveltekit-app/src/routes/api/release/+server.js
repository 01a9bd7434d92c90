import { hold, releaseAll } from '$lib/gate.js'

// POST /api/release?hold: holds the streams from now on; POST /api/release: lets the held ones end.
export const POST = ({ url }) => {
  if (url.searchParams.has('hold')) hold()
  else releaseAll()
  return new Response(null, { status: 204 })
}
