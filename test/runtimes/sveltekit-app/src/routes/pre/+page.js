// Prerendered at build time: the hook's limiters run for it then, where no client sends the request.
export const prerender = true
