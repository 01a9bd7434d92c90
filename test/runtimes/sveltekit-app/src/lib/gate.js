// The last chunk of each /api/stream answer waits here until /api/release is asked for: a stream that is still
// running whose end the test chooses.
let release = () => {}
let released = Promise.resolve()

export function hold() {
  released = new Promise((resolve) => {
    release = resolve
  })
}

export const releaseAll = () => release()

export const held = () => released
