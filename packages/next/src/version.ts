/**
 * The Next.js versions whose middleware a request can skip: before the fixes of CVE-2025-29927 (12.3.5, 13.5.9,
 * 14.2.25, 15.2.3), a request carrying `x-middleware-subrequest` naming the middleware was routed past it, and a
 * limit in middleware (or anything else there) did not apply. `rateLimit()` warns once when it is built on one.
 */
import { emitWarning } from '@ratewindow/core/support'

/** The first patched release of each affected line, as [major, minor, patch]. */
const PATCHED: Partial<Record<number, readonly [number, number, number]>> = {
  12: [12, 3, 5],
  13: [13, 5, 9],
  14: [14, 2, 25],
  15: [15, 2, 3],
}

/** Whether middleware of Next.js `version` can be skipped with `x-middleware-subrequest` (CVE-2025-29927). */
export function skipsMiddleware(version: string): boolean {
  const match = /^(\d+)\.(\d+)\.(\d+)/.exec(version)
  if (match === null) return false
  const [major, minor, patch] = [Number(match[1]), Number(match[2]), Number(match[3])]
  const fixed = PATCHED[major]
  // 11.1.4 and later are affected, and no release before 12 was patched.
  if (fixed === undefined) return major < 12
  return minor < fixed[1] || (minor === fixed[1] && patch < fixed[2])
}

/**
 * The installed Next.js's version, from its package.json; undefined where it cannot be read. No API of Next tells
 * its version at run time; the bundler inlines the file into the middleware's bundle.
 * NOTE: a dynamic import: a static JSON import needs import attributes, which Node 20 before 20.10 cannot parse,
 * and which the build (target node20) would drop.
 */
async function installedNextVersion(): Promise<string | undefined> {
  try {
    const { version } = (await import('next/package.json', { with: { type: 'json' } })).default as {
      version?: unknown
    }
    return typeof version === 'string' ? version : undefined
  } catch {
    return undefined
  }
}

let checked = false

/**
 * Warns once, soon after the first middleware is built, when the installed Next.js lets a request skip middleware.
 * Resolves when checked.
 */
export async function warnIfMiddlewareSkippable(): Promise<void> {
  if (checked) return
  checked = true
  const version = await installedNextVersion()
  if (version === undefined || !skipsMiddleware(version)) return
  emitWarning(
    `Next.js ${version} routes a request that carries \`x-middleware-subrequest\` past middleware ` +
      '(CVE-2025-29927): any client can skip this limit, and every other check in middleware.ts. Upgrade to ' +
      'Next.js 15.2.3 or later (@ratewindow/next supports ^15.2.3 and ^16), or limit in the route handlers and ' +
      'server actions themselves, with `withRateLimit` and `rateLimitAction`, which do not depend on middleware ' +
      '(docs/security.md#nextjs-middleware).',
    'RATEWINDOW_SKIPPABLE_MIDDLEWARE',
  )
}
