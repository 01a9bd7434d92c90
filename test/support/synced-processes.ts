/** Several real application processes (test/support/synced-worker.ts) sharing one Redis, driven over IPC. */
import { type ChildProcess, fork } from 'node:child_process'
import { join } from 'node:path'
import type { WorkerCommand, WorkerSetup } from './synced-worker.js'
import { WORKER_EXEC_ARGV, workerBundle } from './worker-bundle.js'

const WORKER = join(import.meta.dirname, 'synced-worker.ts')

interface Reply {
  type: string
  admitted?: number
  remaining?: number
  source?: string
  message?: string
}

export class WorkerProcess {
  readonly errors: string[] = []
  readonly #replies: Reply[] = []
  readonly #waiting: ((reply: Reply) => void)[] = []

  constructor(readonly child: ChildProcess) {
    child.on('message', (reply: Reply) => {
      if (reply.type === 'error') {
        this.errors.push(reply.message ?? '')
        return
      }
      const next = this.#waiting.shift()
      if (next) next(reply)
      else this.#replies.push(reply)
    })
  }

  /** Sends a command and resolves with the worker's answer; rejects if the worker reports a failure. */
  async ask(command: WorkerCommand): Promise<Reply> {
    const answer = new Promise<Reply>((resolve) => {
      const queued = this.#replies.shift()
      if (queued) resolve(queued)
      else this.#waiting.push(resolve)
    })
    this.child.send(command)
    const reply = await answer
    if (reply.type === 'failed') throw new Error(`worker failed: ${reply.message}`)
    return reply
  }
}

/** Forks `count` workers, each with a SyncedStore set up as `setup` says. */
export async function startWorkers(count: number, setup: WorkerSetup): Promise<WorkerProcess[]> {
  const worker = await workerBundle(WORKER)
  const workers = Array.from(
    { length: count },
    () =>
      new WorkerProcess(
        fork(worker, [], {
          execArgv: WORKER_EXEC_ARGV,
          stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
        }),
      ),
  )
  await Promise.all(workers.map((worker) => worker.ask({ type: 'setup', setup })))
  return workers
}

export async function stopWorkers(workers: readonly WorkerProcess[]): Promise<void> {
  await Promise.all(
    workers.map(async (worker) => {
      if (worker.child.exitCode !== null) return
      const exited = new Promise((resolve) => worker.child.once('exit', resolve))
      await worker.ask({ type: 'close' }).catch(() => worker.child.kill('SIGKILL'))
      await exited
    }),
  )
}
