/** Programs of @ratewindow/h3: the middleware typed against each h3 major's own types, and run on Node. */

import { loader, type ModuleSystem } from './load.js'

/** h3 2: the middleware in `app.use`, alone and on a path, `event.context.rateLimit` typed by the augmentation. */
export const H3_2_PROGRAM = `import { rateLimit, slowDown } from '@ratewindow/h3'
import { H3 } from 'h3'

const app = new H3()
app.use(rateLimit({ limit: 100, window: '1m', key: (event) => event.req.headers.get('x-api-key') ?? 'anonymous' }))
app.use('/api/**', slowDown({ delayAfter: 50, delayMs: 100, trustProxy: 1 }))
app.get('/', (event) => ({ remaining: event.context.rateLimit?.remaining, delay: event.context.slowDown?.delay }))

export default app
`

/** h3 1 (Nitro 2, Nuxt 3 and 4): the middleware as an event handler in \`app.use\`, and as Nitro's middleware file. */
export const H3_1_PROGRAM = `import { rateLimit } from '@ratewindow/h3'
import { createApp, createRouter, defineEventHandler, getRequestHeader } from 'h3'

const app = createApp()
app.use(rateLimit({ limit: 100, window: '1m', skipFailedRequests: true, key: (event) => getRequestHeader(event, 'x-api-key') ?? 'anonymous' }))
app.use(createRouter().get('/', defineEventHandler((event) => ({ remaining: event.context.rateLimit?.remaining }))))

export const middleware = rateLimit({ trustProxy: 1 })
export default app
`

/** Runtime check on one major: limit 2 on Node's server, 200, 200, then 429 with Retry-After. */
export function h3Run(moduleSystem: ModuleSystem, major: 1 | 2): string {
  const load = loader(moduleSystem)
  const setup =
    major === 2
      ? `const { H3 } = ${load('h3')}
  const { toNodeHandler } = ${load('h3/node')}
  const app = new H3()
  app.use(rateLimit({ limit: 2, window: '1m' }))
  app.get('/', () => 'hi')
  const listener = toNodeHandler(app)`
      : `const { createApp, toNodeListener, eventHandler } = ${load('h3')}
  const app = createApp()
  app.use(rateLimit({ limit: 2, window: '1m' }))
  app.use(eventHandler(() => 'hi'))
  const listener = toNodeListener(app)`
  return `async function main() {
  const { createServer } = ${load('node:http')}
  const { rateLimit } = ${load('@ratewindow/h3')}
  ${setup}
  const server = await new Promise((resolve) => { const s = createServer(listener).listen(0, '127.0.0.1', () => resolve(s)) })
  const statuses = []
  let retryAfter
  for (let i = 0; i < 3; i++) {
    const response = await fetch('http://127.0.0.1:' + server.address().port + '/')
    statuses.push(response.status)
    retryAfter = response.headers.get('retry-after')
  }
  server.close()
  if (statuses.join() !== '200,200,429' || !retryAfter) throw new Error('statuses ' + statuses.join())
  console.log('ok')
}
main().catch((error) => { console.error(error); process.exit(1) })
`
}
