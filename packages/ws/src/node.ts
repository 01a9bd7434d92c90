/**
 * What the engine knows of a Node upgrade request (`IncomingMessage`), for the `ws` and Socket.IO bindings: the
 * address is the socket's (neither server has trust-proxy rules of its own), unless the `clientIp` option, or a
 * framework in front (Fastify's `request.ip`), says otherwise.
 */
import type { IncomingMessage } from 'node:http'
import type { FrameworkBinding } from '@ratewindow/core/adapter'
import { invalid } from '@ratewindow/core/support'

/** How a Node binding finds the client address. */
export interface NodeAddressOptions {
  /**
   * The client address, by your own means: behind a proxy you control, the address it forwards (e.g. the last
   * entry of `X-Forwarded-For` it appends). @default the socket's remote address
   */
  clientIp?: (request: IncomingMessage) => string | undefined
}

/**
 * The binding for Node upgrade requests. `framework` gives the address a framework in front already found (with
 * its trust rules) for a request, if any; `where` names the options in the proxy warning.
 */
export function nodeBinding(
  name: string,
  options: NodeAddressOptions & { key?: unknown },
  where: string,
  framework?: (request: IncomingMessage) => string | undefined,
): FrameworkBinding<IncomingMessage> {
  const { clientIp } = options
  if (clientIp !== undefined && typeof clientIp !== 'function')
    throw invalid('ERR_RATEWINDOW_INVALID_OPTION', 'clientIp', clientIp, 'a function of the upgrade request')
  const chosen = clientIp !== undefined || options.key !== undefined
  return {
    name,
    clientIp: (request) => framework?.(request) ?? clientIp?.(request) ?? request.socket?.remoteAddress,
    untrustedForwardedFor: (request) =>
      request.headers['x-forwarded-for'] === undefined
        ? undefined
        : !chosen && framework?.(request) === undefined,
    trustProxyHint: `pass \`clientIp\` (the address your proxy forwards) or \`key\` to ${where}`,
  }
}
