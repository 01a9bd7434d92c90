export const GET = ({ url }) =>
  new Response('answered', { status: Number(url.searchParams.get('status') ?? 200) })
