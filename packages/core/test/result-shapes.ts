/**
 * Results of every kind, as a program sees them: `JSON.stringify` of each and the keys of its spread, from one run
 * on a fixed clock. result-shape.test.ts compares them with those of 41bbd39 (the build before results were built
 * once and settled in place), kept in fixtures/result-shapes-41bbd39.json; to write that file again from a build:
 *
 *   pnpm exec tsx packages/core/test/result-shapes.ts <a checkout of 41bbd39>/packages/core/dist > \
 *     packages/core/test/fixtures/result-shapes-41bbd39.json
 */

/** What is read of a core module: the root entry's names, and the HTTP engine (the root's before 0.2). */
export interface CoreModule {
  RateLimiter: new (
    options: object,
  ) => {
    limit(key: string, options?: { cost?: number }): Promise<object>
    wait(key: string, options?: object): Promise<object>
  }
  MemoryStore: new (options: object) => object
  fixedWindow(options: object): object
  slidingWindowCounter(options: object): object
  gcra(options: object): object
  HttpRateLimiter: new (
    options: object,
    binding: object,
  ) => {
    decideNow(request: object): { result: object } | Promise<{ result: object } | undefined> | undefined
  }
}

export interface Shape {
  json: string
  spread: string[]
}

const NOW = 1_800_000_000_000

/** `JSON.stringify` of a result, each rule by its name (a rule's own fields are not the result's shape). */
function shapeOf(result: object): Shape {
  return {
    json: JSON.stringify(result, (key, value: unknown) =>
      key === 'rule' && typeof value === 'object' && value !== null
        ? (value as { name: string }).name
        : value,
    ),
    spread: Object.keys({ ...result }),
  }
}

export async function resultShapes(core: CoreModule): Promise<Record<string, Shape>> {
  let now = NOW
  const clock = () => now
  const store = () => new core.MemoryStore({ clock })
  const shapes: Record<string, Shape> = {}
  const counter = new core.RateLimiter({
    rules: core.slidingWindowCounter({ limit: 2, window: '1m' }),
    store: store(),
  })
  shapes.allowed = shapeOf(await counter.limit('a'))
  shapes['allowed, cost 0'] = shapeOf(await counter.limit('a', { cost: 0 }))
  await counter.limit('a')
  shapes.denied = shapeOf(await counter.limit('a'))
  const two = new core.RateLimiter({
    rules: [
      core.fixedWindow({ limit: 3, window: '1m', name: 'minute' }),
      core.gcra({ limit: 10, window: '1h', name: 'hour' }),
    ],
    store: store(),
  })
  shapes['two rules, allowed'] = shapeOf(await two.limit('b'))
  await two.limit('b', { cost: 2 })
  shapes['two rules, denied'] = shapeOf(await two.limit('b'))
  const penalised = new core.RateLimiter({
    rules: core.fixedWindow({ limit: 1, window: '1m' }),
    penalty: { after: 1, within: '1m', block: '10m' },
    store: store(),
  })
  await penalised.limit('c')
  shapes['penalty, blocking'] = shapeOf(await penalised.limit('c'))
  now += 1_000
  shapes['penalty, blocked'] = shapeOf(await penalised.limit('c'))
  const shadow = new core.RateLimiter({
    rules: core.fixedWindow({ limit: 1, window: '1m' }),
    shadow: true,
    store: store(),
  })
  await shadow.limit('d')
  shapes['shadow, over the limit'] = shapeOf(await shadow.limit('d'))
  const waiting = new core.RateLimiter({ rules: core.gcra({ limit: 1, window: '100ms' }), store: store() })
  await waiting.limit('e')
  const waited = waiting.wait('e', { maxWait: 5_000 })
  now += 2_000
  shapes.waited = shapeOf(await waited)
  const binding = {
    name: 'shapes',
    clientIp: (request: { ip: string }) => request.ip,
    untrustedForwardedFor: () => false,
    trustProxyHint: '',
  }
  const engine = new core.HttpRateLimiter({ limit: 1, window: '1m', store: store() }, binding)
  const decided = async () => (await engine.decideNow({ ip: '192.0.2.1' }))!.result
  shapes['HTTP, admitted'] = shapeOf(await decided())
  shapes['HTTP, refused'] = shapeOf(await decided())
  return shapes
}

if (process.argv[1]?.endsWith('result-shapes.ts')) {
  const dir = process.argv[2]
  if (dir === undefined) throw new Error('Usage: tsx result-shapes.ts <core dist directory>')
  const core = (await import(`${dir}/index.js`)) as CoreModule
  const adapter = await import(`${dir}/adapter.js`).catch(() => core)
  const shapes = await resultShapes({ ...core, HttpRateLimiter: adapter.HttpRateLimiter })
  console.log(JSON.stringify(shapes, null, 2))
}
