/**
 * Recognises a middleware built anew for each request (`app.use((req, res, next) => rateLimit({ … })(req, res,
 * next))`), and says so once per process: with no `store`, each such middleware counts in a MemoryStore of its
 * own and never limits anyone; on a shared store, each takes the counters over from the last.
 *
 * The sign: for one app (the binding's `app`), middlewares with the same counters (namespace) that were built
 * after that app had begun serving (after a middleware of this process first decided for it). An app built per
 * test, or reloaded, is a new app, and the middlewares of an app are built before it serves; one middleware built
 * lazily, at the first request, is one. From the third such middleware of one app and namespace on, it is a
 * middleware per request.
 */
import { emitWarning } from '../support/runtime.js'

/** The middlewares built late (for one app and namespace) from which a middleware per request is recognised. */
const LATE_BUILDS = 3

/** Middlewares built in this process so far: each engine's serial number is the count when it was built. */
let built = 0

interface Serving {
  /** The serial of the last middleware built before this app's first decision. */
  since: number
  /** Middlewares built after `since` that decided for this app, per namespace. */
  late: Map<string, number>
}

/** The apps a middleware of this process decided for (weakly held: apps come and go with tests and reloads). */
const apps = new WeakMap<object, Serving>()

/** The causes warned about already: once per process each. */
const warned = new Set<'default store' | 'shared store'>()

/** One middleware's watch: it looks at the middleware's first decision only. */
export class PerRequestWatch {
  readonly #serial = ++built
  readonly #where: string
  readonly #ownStore: boolean
  /** Whether the middleware has not decided yet: `first` is to be called (one field read per request). */
  watching = true

  /**
   * @param where The middleware's name in messages (`rateLimit()`).
   * @param ownStore Whether it counts in a MemoryStore it made itself (no `store` option).
   */
  constructor(where: string, ownStore: boolean) {
    this.#where = where
    this.#ownStore = ownStore
  }

  /** The middleware's first decision, for `app` (undefined: the framework tells no app) under `namespace`. */
  first(app: object | undefined, namespace: string): void {
    this.watching = false
    if (app === undefined) return
    const serving = apps.get(app)
    if (serving === undefined) {
      apps.set(app, { since: built, late: new Map() })
      return
    }
    if (this.#serial <= serving.since) return
    const late = (serving.late.get(namespace) ?? 0) + 1
    serving.late.set(namespace, late)
    if (late >= LATE_BUILDS) this.#warn(namespace)
  }

  #warn(namespace: string): void {
    const cause = this.#ownStore ? 'default store' : 'shared store'
    if (warned.has(cause)) return
    warned.add(cause)
    const where = this.#where
    const effect = this.#ownStore
      ? 'With no `store`, each makes a MemoryStore of its own that counts one request: no client is ever limited.'
      : 'They count on the `store` you passed, so limits hold, but every request pays for building and checking a middleware, and on one store object each takes the counters over from the one before it.'
    try {
      emitWarning(
        `${where} is built anew for each request: ${LATE_BUILDS} middlewares with the same counters (\`${namespace}\`) were built after this app had begun serving. ${effect} ` +
          `Build the middleware once, where the app is built, and use that one for every request: \`const limiter = ${where.replace('()', '({ … })')}\`, then \`app.use(limiter)\` (or pass \`limiter\` to the route).`,
        'RATEWINDOW_LIMITER_PER_REQUEST',
      )
    } catch {
      // a warning listener that throws: nothing more can be done without risking the request
    }
  }
}
