/** Programs of the operators' packages: @ratewindow/cli and @ratewindow/admin with each framework's mount. */

import { loader, type ModuleSystem } from './load.js'

/** @ratewindow/cli's library face: `run`, the exit codes, the config and `--json` types. */
export const CLI_PROGRAM = `import { type CliConfig, EXIT, type ExitCode, type InspectJson, run, type TopJson } from '@ratewindow/cli'
import { fixedWindow } from '@ratewindow/core'

export const config: CliConfig = {
  limiters: [{ name: 'api', rules: [fixedWindow({ limit: 100, window: '1m' })], overrides: true }, { limit: 5, window: '15m' }],
}
export const code: Promise<ExitCode> = run(['--help'], { stdout: () => {} })
export const usage: ExitCode = EXIT.usage
export const rows = (top: TopJson, inspected: InspectJson): number => top.keys.length + inspected.limiters.length
`

/**
 * Runtime check of @ratewindow/cli: run() answers help (0) and a usage error (2) through the library, and the
 * installed binary answers --help (no Redis needed for either).
 */
export function cliRun(moduleSystem: ModuleSystem): string {
  const load = loader(moduleSystem)
  return `async function main() {
  const { run, EXIT } = ${load('@ratewindow/cli')}
  const { execFileSync } = ${load('node:child_process')}
  const { createRequire } = ${load('node:module')}
  const { dirname, join } = ${load('node:path')}
  const out = []
  if ((await run(['--help'], { stdout: (text) => out.push(text) })) !== EXIT.ok) throw new Error('--help did not exit 0')
  if (!out.join('').includes('ratewindow top')) throw new Error('--help lacks top: ' + out.join(''))
  if ((await run(['frobnicate'], { stderr: () => {} })) !== EXIT.usage) throw new Error('a usage error did not exit 2')
  const manifest = createRequire(join(process.cwd(), 'x.js')).resolve('@ratewindow/cli/package.json')
  const bin = join(dirname(manifest), ${load('node:fs')}.readFileSync(manifest, 'utf8').match(/"ratewindow": "([^"]+)"/)[1])
  if (!execFileSync(process.execPath, [bin, '--help'], { encoding: 'utf8' }).includes('Exit codes')) throw new Error('the bin did not answer --help')
  console.log('ok')
}
main().catch((error) => { console.error(error); process.exit(1) })
`
}

/** @ratewindow/admin: the handler with its stats, and each framework's mount, typed against the frameworks' own types. */
export const ADMIN_PROGRAM = `import { fixedWindow, MemoryStore, RateLimiter } from '@ratewindow/core'
import { type AdminHandler, type AdminStatsView, adminHandler, adminStats } from '@ratewindow/admin'
import { expressAdmin } from '@ratewindow/admin/express'
import { fastifyAdmin } from '@ratewindow/admin/fastify'
import { honoAdmin } from '@ratewindow/admin/hono'
import { nestAdmin } from '@ratewindow/admin/nestjs'
import express from 'express'
import fastify from 'fastify'
import { Hono } from 'hono'

const stats = adminStats({ capacity: 100 })
const api = new RateLimiter({
  rules: fixedWindow({ limit: 10, window: '1m' }),
  store: new MemoryStore(),
  name: 'api',
  overrides: true,
  observer: stats,
})
export const admin: AdminHandler = adminHandler({
  limiters: [api],
  authorize: (request: Request) => request.headers.get('authorization') === 'Bearer t' && 'ops',
  stats,
  basePath: '/_ratewindow',
})
export const view: AdminStatsView = stats.view(10)
express().use(expressAdmin(admin))
new Hono().use(honoAdmin(admin))
export const registered = fastify().register(fastifyAdmin(admin))
export const nest: (request: import('node:http').IncomingMessage, response: import('node:http').ServerResponse, next: () => void) => unknown = nestAdmin(admin)
`

/**
 * The Koa mount, in a project of its own: beside Express 5, npm hoists content-disposition 1 (typed), whose types
 * @types/koa cannot read under TypeScript 7's lib checks.
 */
export const ADMIN_KOA_PROGRAM = `import { adminHandler } from '@ratewindow/admin'
import { koaAdmin } from '@ratewindow/admin/koa'
import { RateLimiter, fixedWindow } from '@ratewindow/core'
import Koa from 'koa'

const api = new RateLimiter({ rules: fixedWindow({ limit: 10, window: '1m' }), name: 'api' })
export const app = new Koa().use(koaAdmin(adminHandler({ limiters: [api], authorize: () => true })))
`

/**
 * Runtime check of @ratewindow/admin on Express: refused without the token, a key blocked through HTTP and refused at
 * its next decision, then /stats counting that refusal.
 */
export function adminRun(moduleSystem: ModuleSystem): string {
  const load = loader(moduleSystem)
  return `async function main() {
  const { RateLimiter, fixedWindow } = ${load('@ratewindow/core')}
  const { adminHandler, adminStats } = ${load('@ratewindow/admin')}
  const { expressAdmin } = ${load('@ratewindow/admin/express')}
  const express = ${load('express')}.default ?? ${load('express')}
  const stats = adminStats()
  const api = new RateLimiter({ rules: fixedWindow({ limit: 5, window: '1m' }), name: 'api', overrides: true, observer: stats })
  const admin = adminHandler({ limiters: [api], authorize: (request) => request.headers.get('authorization') === 'Bearer t' && 'ops', stats, basePath: '/_rw' })
  const app = express()
  app.use(expressAdmin(admin))
  const server = app.listen(0, '127.0.0.1')
  await new Promise((resolve) => server.once('listening', resolve))
  const base = 'http://127.0.0.1:' + server.address().port + '/_rw'
  const auth = { authorization: 'Bearer t', 'content-type': 'application/json' }
  const refused = await fetch(base + '/limiters')
  const blocked = await fetch(base + '/limiters/api/keys/k%2F1/block', { method: 'POST', headers: auth, body: '{"for":"1h"}' })
  const decision = await api.limit('k/1')
  const view = await (await fetch(base + '/stats', { headers: auth })).json()
  server.close()
  const seen = [refused.status, blocked.status, decision.allowed, view.refused[0] && view.refused[0].key].join()
  if (seen !== '401,200,false,k/1') throw new Error('admin ' + seen)
  console.log('ok')
}
main().catch((error) => { console.error(error); process.exit(1) })
`
}
