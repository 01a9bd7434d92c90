// Limited by the middleware (or proxy): its matcher is /api/limited.
export const dynamic = 'force-dynamic'

export function GET() {
  return Response.json({ ok: true })
}
