#!/usr/bin/env node
import { run } from './run.js'

const controller = new AbortController()
process.once('SIGINT', () => controller.abort())
run(process.argv.slice(2), { signal: controller.signal }).then((code) => {
  process.exitCode = code
})
