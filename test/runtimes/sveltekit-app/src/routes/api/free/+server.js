export const GET = () => new Response('free')
