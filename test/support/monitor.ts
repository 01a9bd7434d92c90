/**
 * MONITOR on a plain socket to one server, parsed here: ioredis's own `monitor()` on a server that other test files
 * keep busy failed once with "Command queue state error" (a streamed line read as the reply to a command).
 */
import { connect as connectSocket, type Socket } from 'node:net'

/**
 * MONITOR on a plain socket to one server: each line's source (`lua` for commands a script ran) and its arguments
 * (quoted; the keys and arguments here hold no quotes).
 */
export async function monitorOn(
  port: number,
  line: (source: string, args: string[]) => void,
): Promise<Socket> {
  const socket = connectSocket({ host: '127.0.0.1', port })
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve)
    socket.once('error', reject)
  })
  let buffered = ''
  socket.setEncoding('utf8')
  socket.on('data', (chunk: string) => {
    buffered += chunk
    let end = buffered.indexOf('\r\n')
    while (end !== -1) {
      const text = buffered.slice(0, end)
      buffered = buffered.slice(end + 2)
      const match = /^\+[\d.]+ \[\d+ ([^\]]+)\] "(.*)"$/.exec(text)
      if (match !== null) line(match[1]!, match[2]!.split('" "'))
      end = buffered.indexOf('\r\n')
    }
  })
  socket.write('MONITOR\r\n')
  return socket
}
