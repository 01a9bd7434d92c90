import { AdminError } from './reply.js'

/**
 * The JSON object of an action's body: `Content-Type: application/json` (415 otherwise, so that no HTML form can
 * post here), at most `maxBytes` bytes (413, read no further), an object (400). An empty body is `{}`.
 */
export async function jsonBody(request: Request, maxBytes: number): Promise<Record<string, unknown>> {
  const type = request.headers.get('content-type') ?? ''
  if (type.split(';')[0]!.trim().toLowerCase() !== 'application/json')
    throw new AdminError(
      415,
      'ERR_RATEWINDOW_UNSUPPORTED_MEDIA_TYPE',
      `Actions take \`Content-Type: application/json\`; received ${type === '' ? 'none' : JSON.stringify(type.slice(0, 80))}.`,
    )
  const text = await readCapped(request, maxBytes)
  if (text.trim() === '') return {}
  let body: unknown
  try {
    body = JSON.parse(text)
  } catch (error) {
    throw new AdminError(
      400,
      'ERR_RATEWINDOW_INVALID_JSON',
      `The body is not JSON: ${(error as Error).message}`,
    )
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body))
    throw new AdminError(400, 'ERR_RATEWINDOW_INVALID_JSON', 'The body must be a JSON object, such as {}.')
  return body as Record<string, unknown>
}

async function readCapped(request: Request, maxBytes: number): Promise<string> {
  const tooLarge = () =>
    new AdminError(
      413,
      'ERR_RATEWINDOW_BODY_TOO_LARGE',
      `The body is over ${maxBytes} bytes (\`maxBodyBytes\`).`,
    )
  const declared = Number(request.headers.get('content-length'))
  if (declared > maxBytes) throw tooLarge()
  if (request.body === null) return ''
  const reader = request.body.getReader()
  const decoder = new TextDecoder()
  let text = ''
  let size = 0
  for (;;) {
    const { done, value } = await reader.read()
    if (done) return text + decoder.decode()
    size += value.byteLength
    if (size > maxBytes) {
      await reader.cancel().catch(() => {})
      throw tooLarge()
    }
    text += decoder.decode(value, { stream: true })
  }
}
