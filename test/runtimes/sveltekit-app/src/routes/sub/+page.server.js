// A page whose load reads an endpoint of the same app through `event.fetch`: one client request, one count.
export const load = async ({ fetch }) => ({ data: await (await fetch('/sub/api')).json() })
