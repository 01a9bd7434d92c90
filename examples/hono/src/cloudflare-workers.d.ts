// The Worker's bindings, as `wrangler types` (or @cloudflare/workers-types) declares them in a Workers project:
// only what src/worker.ts uses, so that the repository's typecheck needs no Workers types package.
declare module 'cloudflare:workers' {
  export const env: { RATE_LIMITER: import('@ratewindow/cloudflare').DurableObjectNamespaceLike }
}
