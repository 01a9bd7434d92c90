#!/usr/bin/env node
import { readFileSync, realpathSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { run } from './run.js'

const controller = new AbortController()
process.once('SIGINT', () => controller.abort())
run(process.argv.slice(2), { signal: controller.signal, version: version() }).then(async (code) => {
  // The command is done: exit with its code once stdout and stderr are flushed, even when the config module left
  // handles open (an application's own Redis client, a timer) that would keep Node running.
  await Promise.all([process.stdout, process.stderr].map(flushed))
  process.exit(code)
})

/** Resolves once everything written to `stream` so far has been handed to the system (or the stream failed). */
function flushed(stream: NodeJS.WriteStream): Promise<void> {
  return new Promise((resolve) => {
    if (stream.destroyed || stream.writableEnded) return resolve()
    stream.once('error', () => resolve())
    stream.write('', () => resolve())
  })
}

/** The package's version, from the package.json next to `dist/` (where the bin runs from). */
function version(): string | undefined {
  try {
    const manifest = join(dirname(realpathSync(process.argv[1]!)), '..', 'package.json')
    return (JSON.parse(readFileSync(manifest, 'utf8')) as { version?: string }).version
  } catch {
    return undefined
  }
}
