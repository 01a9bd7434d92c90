/** At most a number of tasks at once: `slots(task)` runs the task when a place is free, the others wait in order. */
export type Slots = <T>(task: () => Promise<T>) => Promise<T>

/** `size` places: at most `size` tasks run at once; the others wait in order. */
export function slots(size: number): Slots {
  let active = 0
  const waiting: (() => void)[] = []
  return async (task) => {
    if (active < size) active++
    else await new Promise<void>((resolve) => waiting.push(resolve)) // the place is handed over
    try {
      return await task()
    } finally {
      const next = waiting.shift()
      if (next) next()
      else active--
    }
  }
}
