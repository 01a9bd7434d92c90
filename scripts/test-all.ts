/**
 * `pnpm test:all`: every check CI runs, in three stages. The steps of a stage run at once (on two cores most of
 * them wait on servers, stores and child processes more than they compute); a stage starts when the one before
 * it has passed. Each step's output is printed whole when it ends, then a table of the steps and their seconds.
 *
 *   1. lint, typecheck, build
 *   2. check:publish, check:surface, check:packages   (on the build)
 *   3. test, test:nest11
 *
 * `pnpm test:all --sequential` runs the steps one after another instead (to time each one alone).
 */
import { spawn } from 'node:child_process'
import { readFileSync } from 'node:fs'

interface Step {
  script: string
  seconds?: number
  code?: number | null
}

const scripts: Record<string, string> = JSON.parse(readFileSync('package.json', 'utf8')).scripts
const STAGES: string[][] = [
  ['lint', 'typecheck', 'build'],
  ['check:publish', 'check:surface', 'check:packages'],
  ['test', 'test:nest11'],
].map((stage) => stage.filter((script) => script in scripts))

const sequential = process.argv.includes('--sequential')

/** Runs one package script, its output kept until it ends; resolves with its exit code. */
function run(step: Step): Promise<Step> {
  const started = performance.now()
  console.log(`▶ ${step.script}`)
  return new Promise((resolve) => {
    const child = spawn('pnpm', ['run', '--silent', step.script], { stdio: ['ignore', 'pipe', 'pipe'] })
    const output: Buffer[] = []
    child.stdout.on('data', (chunk: Buffer) => output.push(chunk))
    child.stderr.on('data', (chunk: Buffer) => output.push(chunk))
    child.on('close', (code) => {
      step.code = code
      step.seconds = (performance.now() - started) / 1_000
      const verdict = code === 0 ? 'passed' : `FAILED (exit ${code})`
      console.log(`\n── ${step.script}: ${verdict} in ${step.seconds.toFixed(1)} s ──`)
      process.stdout.write(Buffer.concat(output))
      resolve(step)
    })
  })
}

const steps: Step[] = []
const started = performance.now()
let failed = false
for (const stage of STAGES) {
  const each = stage.map((script): Step => ({ script }))
  steps.push(...each)
  if (sequential) for (const step of each) await run(step)
  else await Promise.all(each.map(run))
  if (each.some((step) => step.code !== 0)) {
    failed = true
    break
  }
}

const total = (performance.now() - started) / 1_000
console.log('\n step               seconds  result')
for (const step of steps) {
  const result = step.code === undefined ? 'not run' : step.code === 0 ? 'passed' : 'FAILED'
  console.log(` ${step.script.padEnd(18)} ${(step.seconds?.toFixed(1) ?? '–').padStart(7)}  ${result}`)
}
console.log(` ${'total'.padEnd(18)} ${total.toFixed(1).padStart(7)}  ${failed ? 'FAILED' : 'passed'}`)
process.exitCode = failed ? 1 : 0
