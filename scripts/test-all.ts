/**
 * `pnpm test:all`: every check CI runs. Each step starts as soon as the steps it needs have passed, so that the
 * tests and the package checks share the machine (each waits on servers, stores, installs and child processes
 * for much of its time); each step's output is printed whole when it ends, then a table of the steps, their
 * seconds and their CPU seconds (on a machine the steps keep busy, the total CPU over the cores is the least the
 * run can take).
 *
 *   lint, typecheck, build                             at once
 *   check:publish, check:surface, check:packages       on the build
 *   test, test:nest11                                  on the build (next.test.ts packs it, the declaration
 *                                                      tests read it)
 *
 * A step that fails fails the run: the steps not started by then are not run, those running finish. `pnpm
 * test:all --sequential` runs the steps one after another instead (to time each one alone).
 */
import { spawn, spawnSync } from 'node:child_process'
import { readFileSync } from 'node:fs'

interface Step {
  script: string
  /** The steps that must pass before this one starts. */
  needs: string[]
  seconds?: number
  /** The CPU seconds of the step's processes (see `childCpu`), where the system tells them. */
  cpu?: number
  code?: number | null
}

/**
 * The CPU seconds (user and system) of this process's children that have ended, with theirs: /proc/self/stat's
 * cutime and cstime, in clock ticks (100 a second on Linux); undefined elsewhere. Read when a step's process
 * ends, its growth since the last read is that step's CPU (processes a step left running, such as a server it
 * started and did not stop, are not counted).
 */
function childCpu(): number | undefined {
  try {
    const stat = readFileSync('/proc/self/stat', 'utf8')
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    return (Number(fields[13]) + Number(fields[14])) / 100
  } catch {
    return undefined
  }
}
let cpuRead = childCpu()

const scripts: Record<string, string> = JSON.parse(readFileSync('package.json', 'utf8')).scripts
const NEEDS: Record<string, string[]> = {
  lint: [],
  typecheck: [],
  build: [],
  'check:publish': ['build'],
  'check:surface': ['build'],
  'check:packages': ['build'],
  test: ['build'],
  'test:nest11': ['build'],
}
const steps: Step[] = Object.entries(NEEDS)
  .filter(([script]) => script in scripts)
  .map(([script, needs]) => ({ script, needs: needs.filter((need) => need in scripts) }))

/**
 * The steps that yield the CPU to `test`, the longest step, which the run waits for: they run at a lower priority
 * (`nice`), and use what `test` leaves (it waits on servers, stores and child processes for much of its time).
 * The steps keep the machine busy throughout: on 2 cores, with every step at one priority, the run took 1,009 s,
 * the test step 926 of them.
 */
const YIELDING = new Set(['check:publish', 'check:surface', 'check:packages', 'test:nest11'])
/** `nice`, where the system has it (not on Windows): the command that runs a yielding step. */
const niceAvailable = spawnSync('nice', ['-n', '5', 'true'], { stdio: 'ignore' }).status === 0

const sequential = process.argv.includes('--sequential')

/** Runs one package script, its output kept until it ends; resolves with its exit code. */
function run(step: Step): Promise<Step> {
  const started = performance.now()
  console.log(`▶ ${step.script}`)
  return new Promise((resolve) => {
    const command = ['pnpm', 'run', '--silent', step.script]
    if (niceAvailable && YIELDING.has(step.script) && !sequential) command.unshift('nice', '-n', '5')
    const child = spawn(command[0]!, command.slice(1), { stdio: ['ignore', 'pipe', 'pipe'] })
    const output: Buffer[] = []
    child.stdout.on('data', (chunk: Buffer) => output.push(chunk))
    child.stderr.on('data', (chunk: Buffer) => output.push(chunk))
    child.on('close', (code) => {
      step.code = code
      step.seconds = (performance.now() - started) / 1_000
      const cpu = childCpu()
      if (cpu !== undefined && cpuRead !== undefined) step.cpu = cpu - cpuRead
      cpuRead = cpu
      const verdict = code === 0 ? 'passed' : `FAILED (exit ${code})`
      console.log(`\n── ${step.script}: ${verdict} in ${step.seconds.toFixed(1)} s ──`)
      process.stdout.write(Buffer.concat(output))
      resolve(step)
    })
  })
}

const started = performance.now()
const passed = (script: string) => steps.some((step) => step.script === script && step.code === 0)
const failed = () => steps.some((step) => step.code !== undefined && step.code !== 0)
if (sequential) {
  for (const step of steps) if (!failed()) await run(step)
} else {
  const begun = new Set<Step>()
  const running = new Set<Promise<Step>>()
  /** Starts each step whose needs have passed, unless a step has failed. */
  const startReady = () => {
    for (const step of steps) {
      if (failed() || begun.has(step) || !step.needs.every(passed)) continue
      begun.add(step)
      const done: Promise<Step> = run(step).finally(() => running.delete(done))
      running.add(done)
    }
  }
  for (startReady(); running.size > 0; startReady()) await Promise.race(running)
}

const total = (performance.now() - started) / 1_000
const column = (value: number | undefined) => (value?.toFixed(1) ?? '–').padStart(7)
console.log('\n step               seconds  cpu s  result')
for (const step of steps) {
  const result = step.code === undefined ? 'not run' : step.code === 0 ? 'passed' : 'FAILED'
  console.log(` ${step.script.padEnd(18)} ${column(step.seconds)} ${column(step.cpu)}  ${result}`)
}
const ok = steps.every((step) => step.code === 0)
const cpu = steps.some((step) => step.cpu !== undefined)
  ? steps.reduce((sum, step) => sum + (step.cpu ?? 0), 0)
  : undefined
console.log(` ${'total'.padEnd(18)} ${column(total)} ${column(cpu)}  ${ok ? 'passed' : 'FAILED'}`)
process.exitCode = ok ? 0 : 1
