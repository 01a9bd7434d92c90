// Preloaded (`node --import`) into a doc snippet or example started by the docs check: whatever port and host
// the program asks for, its servers listen on a free port of 127.0.0.1, and the first one's port is sent to the
// parent process over IPC. The docs keep their natural `app.listen(3000)`; the check never collides with a
// server already on 3000 and never listens beyond loopback.
//
// It also stops the program's clock (`Date.now`, the memory store's default) at the instant it starts: the
// requests of a check then all arrive "at once", and a status never depends on how fast the machine is (a window
// boundary crossed mid-check, a token refilled by a slow run). Time kept by Redis (`TIME`) is not stopped.
import net from 'node:net'

const startedAt = Date.now()
Date.now = () => startedAt

const listen = net.Server.prototype.listen
let reported = false

net.Server.prototype.listen = function listenOnFreeLoopbackPort(...args) {
  const callbacks = args.filter((arg) => typeof arg === 'function')
  const first = args[0]
  const options =
    typeof first === 'object' && first !== null && !Array.isArray(first)
      ? { ...first, port: 0, host: '127.0.0.1' }
      : { port: 0, host: '127.0.0.1' }
  delete options.path
  this.once('listening', () => {
    if (reported) return
    reported = true
    const address = this.address()
    process.send?.({ port: typeof address === 'object' && address ? address.port : undefined })
  })
  return listen.call(this, options, ...callbacks)
}
