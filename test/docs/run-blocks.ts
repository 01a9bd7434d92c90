/**
 * Runs the docs' `run` blocks in one process (`node --conditions=@ratewindow/source --import tsx run-blocks.ts
 * <results.json> <block.ts>...`): each block is imported in turn, so the packages' sources are loaded once rather
 * than once a block. A block fails when its import throws or rejects, or when an error it left (an unhandled
 * rejection, an uncaught exception) surfaces before the next block starts. After the last block the event loop
 * must empty within 30 s, as a block's own process would have to exit: what still keeps it alive is named.
 * The results, `{ [file]: 'ok' | message, '': 'ok' | what kept the event loop busy }`, are written to
 * results.json.
 */
import { writeFileSync } from 'node:fs'
import { pathToFileURL } from 'node:url'

const [resultsFile, ...files] = process.argv.slice(2)
const results: Record<string, string> = {}
let current: string | undefined
/** Keeps a block's first failure; `''` stands for what no block owns (the event loop left busy at the end). */
const failed = (file: string | undefined, error: unknown) => {
  const where = file ?? ''
  if (results[where] === undefined || results[where] === 'ok')
    results[where] = error instanceof Error ? (error.stack ?? error.message) : String(error)
}
process.on('unhandledRejection', (error) => failed(current, error))
process.on('uncaughtException', (error) => failed(current, error))

/** What keeps the event loop alive, by kind (timers, sockets, ...). */
const alive = () => process.getActiveResourcesInfo().filter((kind) => kind !== 'TTYWrap')

const baseline = alive().length
for (const file of files) {
  current = file
  results[file] = 'ok'
  try {
    await import(pathToFileURL(file).href)
  } catch (error) {
    failed(file, error)
  }
  // A rejection or exception the block left behind surfaces within a turn or two of the event loop.
  await new Promise((resolve) => setImmediate(resolve))
  await new Promise((resolve) => setTimeout(resolve, 0))
}
current = undefined
results[''] = 'ok'
const deadline = Date.now() + 30_000
while (alive().length > baseline && Date.now() < deadline)
  await new Promise((resolve) => setTimeout(resolve, 50))
if (alive().length > baseline)
  failed(undefined, new Error(`the blocks left the event loop busy after 30 s: ${alive().join(', ')}`))
writeFileSync(resultsFile!, JSON.stringify(results))
process.exit(0)
