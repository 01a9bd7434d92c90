import { connectionStalled, type FrameworkBinding, socketClosed, withoutPort } from '@ratewindow/core/adapter'
import type { Request, Response } from 'express'

/** What the engines of `rateLimit()` and `slowDown()` know of Express: addresses, trust proxy, routes. */
export const binding: FrameworkBinding<Request> = {
  name: 'Express',
  // Behind a trusted proxy, `req.ip` is its X-Forwarded-For entry as written: some proxies add the client's port.
  clientIp: (request) => {
    const ip = request.ip
    return ip === undefined ? request.socket.remoteAddress : withoutPort(ip)
  },
  onClose: (request, listener) => socketClosed(request.socket, listener),
  app: (request) => request.app,
  // A closed connection takes the address with it (`request.ip` is undefined then).
  gone: (request) => request.socket.destroyed === true,
  stalled: connectionStalled,
  untrustedForwardedFor: (request) =>
    request.headers['x-forwarded-for'] === undefined ? undefined : !request.app.get('trust proxy'),
  trustProxyHint: "call app.set('trust proxy', <number of proxies or their addresses>)",
  permissiveTrustProxy: (request) => request.app.get('trust proxy') === true,
  permissiveTrustProxyHint:
    "Set app.set('trust proxy', 1) (the number of proxies in front of the app) or their addresses, e.g. 'loopback'.",
  // Known when the limiter is a route's own middleware (`app.get('/users/:id', limiter, handler)`).
  route: routePattern,
  options: ['handler'],
  writeHeaders: (response, headers) => {
    const target = response as Response
    if (!target.headersSent) for (const name in headers) target.setHeader(name, headers[name]!)
  },
  // One limiter's fields per answer (core's `showFields`, in index.ts).
  showsOneQuota: true,
}

/** The route pattern of each route object (`request.route`), found on its first request. */
const patterns = new WeakMap<object, string>()

/**
 * The route's pattern for observer events and metric labels: never a value from the URL, which the client
 * chooses. Express keeps no mount pattern, only the matched path (`request.baseUrl`: `/t/acme` for a router
 * mounted at `/t/:tenant`), so the mount is included only where it holds no parameters, as found once per
 * route by walking the app's routers; otherwise the route's own pattern (`request.route.path`) stands alone.
 */
function routePattern(request: Request): string | undefined {
  const route = request.route as { path?: unknown } | undefined
  if (route?.path === undefined) return undefined
  let pattern = patterns.get(route)
  if (pattern === undefined) {
    const own = String(route.path)
    pattern = request.baseUrl !== '' && literalMount(request, route) ? `${request.baseUrl}${own}` : own
    patterns.set(route, pattern)
  }
  return pattern
}

interface RouterLayer {
  handle?: { stack?: unknown }
  route?: unknown
  /** Express 4: the parameters of the layer's path. */
  keys?: unknown
  /** Express 5 (router 2.3+): the path the layer was declared with. */
  rawPath?: unknown
}

/** Whether a path pattern (string) holds no parameter, wildcard, optional part or escape. */
const literalPath = (path: unknown) => typeof path === 'string' && !/[:*?(){}[\]\\]/.test(path)

/**
 * Whether `route` is reached through mounts that hold no parameters: the app's own mount path (sub-apps)
 * and every router on the one way from the app to the route. Unknown shapes count as parameters.
 */
function literalMount(request: Request, route: object): boolean {
  try {
    type Mounted = { parent?: Mounted; mountpath?: unknown }
    for (let app = request.app as Mounted; app.parent !== undefined; app = app.parent) {
      if (!literalPath(app.mountpath)) return false
    }
    const app = request.app as unknown as { _router?: { stack?: unknown }; router?: { stack?: unknown } }
    // Express 4 keeps its router in `_router` (its `app.router` throws); Express 5 in `app.router`.
    const root = app._router ?? app.router
    const ways: RouterLayer[][] = []
    findRoute(root?.stack, route, [], ways, 0)
    return ways.length === 1 && ways[0]!.every(literalLayer)
  } catch {
    return false
  }
}

function literalLayer(layer: RouterLayer): boolean {
  if (Array.isArray(layer.keys)) return layer.keys.length === 0
  return literalPath(layer.rawPath)
}

/** Every way (the router layers mounted on it) from `stack` down to the layer of `route`. */
function findRoute(stack: unknown, route: object, path: RouterLayer[], ways: RouterLayer[][], depth: number) {
  if (!Array.isArray(stack) || depth > 32 || ways.length > 1) return
  for (const layer of stack as RouterLayer[]) {
    if (layer.route === route) ways.push(path)
    else if (layer.handle !== undefined && Array.isArray(layer.handle.stack))
      findRoute(layer.handle.stack, route, [...path, layer], ways, depth + 1)
  }
}
