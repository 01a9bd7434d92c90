/**
 * Issue 32, item 7: `socketClosed`, how the HTTP engine and `slowDown()` hear a client leave. A client that
 * pipelines thousands of requests on one connection makes thousands of waiters on one socket.
 */
import { EventEmitter } from 'node:events'
import { describe, expect, it } from 'vitest'
import { socketClosed } from '../src/entries/adapter.js'

class Socket extends EventEmitter {
  destroyed = false
  close() {
    this.destroyed = true
    this.emit('close')
  }
}

describe('socketClosed', () => {
  it('holds one close listener on a socket however many wait on it, and runs each waiter still listening once', async () => {
    const socket = new Socket()
    const warnings: Error[] = []
    const listen = (warning: Error) => void warnings.push(warning)
    process.on('warning', listen)
    try {
      let heard = 0
      const stops = Array.from({ length: 5_000 }, () => socketClosed(socket, () => heard++))
      expect(socket.listenerCount('close')).toBe(1)
      for (const stop of stops.slice(0, 2_000)) stop()
      socket.close()
      expect(heard).toBe(3_000)
      socket.close()
      expect(heard).toBe(3_000)
      // Node writes MaxListenersExceededWarning on a later tick.
      await new Promise((resolve) => setImmediate(resolve))
    } finally {
      process.off('warning', listen)
    }
    expect(warnings).toEqual([])
  })

  it('a socket closed already: the listener runs on a microtask', async () => {
    const socket = new Socket()
    socket.destroyed = true
    let heard = 0
    socketClosed(socket, () => heard++)
    expect(heard).toBe(0)
    await Promise.resolve()
    expect(heard).toBe(1)
  })
})
