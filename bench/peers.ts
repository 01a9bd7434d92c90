/** Peer libraries, configured like ours (same limit, window and store kind), for side-by-side runs. */
export async function peerMiddleware(
  framework: string,
  variant: string,
  _limit: number,
  _redis: () => unknown,
): Promise<unknown> {
  throw new Error(`unknown variant ${variant} for ${framework}`)
}
