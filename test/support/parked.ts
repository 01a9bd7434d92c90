/**
 * Requests a test app parks until the test lets them go (GET /hold, /slow, /work), written once for the Node
 * matrix (test/http/harness.ts, every framework) and the runtime programs (test/runtimes/suite-scenarios.ts).
 * Imports nothing: the runtime programs bundle it for Node, Bun, Deno and workerd.
 */

/**
 * How a parked request waits until `released`. The default awaits it; workerd cancels a request that awaits
 * nothing of its own, so its Worker waits on a timer of the request's own instead (suite-worker.ts).
 */
export type Park = (released: Promise<void>) => Promise<void>

/** Requests parked until the test lets them all go. */
export interface Parking {
  /** Requests parked now. */
  readonly waiting: number
  /** Parks the calling request; resolves once `releaseAll` is called. */
  wait(): Promise<void>
  releaseAll(): void
}

export function parking(park: Park = (released) => released): Parking {
  const resumes: (() => void)[] = []
  return {
    get waiting() {
      return resumes.length
    },
    wait: () => park(new Promise<void>((resolve) => resumes.push(resolve))),
    releaseAll() {
      for (const resume of resumes.splice(0)) resume()
    },
  }
}

/** What GET /work's handlers did. */
export interface WorkCount {
  started: number
  /** Handlers between their start and their return. */
  running: number
  /** The most handlers running at once. */
  peak: number
  /** Handlers whose client left while they ran (the request's abort signal, where the app passes it). */
  aborted: number
}

/** GET /work's handlers: each keeps working after its client left, and returns once the test calls `finish()`. */
export interface CountedWork {
  /** What the handlers did. */
  count: WorkCount
  /** A handler's work; `signal`, the request's, aborts when its client leaves. */
  run(signal?: AbortSignal): Promise<void>
  /** Lets every running handler return. */
  finish(): void
}

export function countedWork(park?: Park): CountedWork {
  const parked = parking(park)
  const count: WorkCount = { started: 0, running: 0, peak: 0, aborted: 0 }
  return {
    count,
    async run(signal) {
      count.started++
      count.peak = Math.max(count.peak, ++count.running)
      let running = true
      signal?.addEventListener('abort', () => {
        if (running) count.aborted++
      })
      await parked.wait()
      running = false
      count.running--
    },
    finish: () => parked.releaseAll(),
  }
}
