import { utf8 } from '../../support/hash.js'
import type { RedisScriptRunner } from './clients/index.js'

/** CRC16-CCITT (XMODEM: polynomial 0x1021, initial value 0), the checksum Redis Cluster uses for key slots. */
const TABLE = new Uint16Array(256)
for (let byte = 0; byte < 256; byte++) {
  let crc = byte << 8
  for (let bit = 0; bit < 8; bit++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff
  TABLE[byte] = crc
}

export const CLUSTER_SLOTS = 16_384

/**
 * The Redis Cluster slot of `key`, as `CLUSTER KEYSLOT` computes it: CRC16 of the key's hash tag (the text
 * between the first `{` and the next `}`, when not empty) or of the whole key, modulo 16384.
 */
export function clusterSlot(key: string): number {
  let hashed = key
  const open = key.indexOf('{')
  if (open !== -1) {
    const close = key.indexOf('}', open + 1)
    if (close > open + 1) hashed = key.slice(open + 1, close)
  }
  let crc = 0
  for (const byte of utf8(hashed)) crc = ((crc << 8) & 0xffff) ^ TABLE[((crc >> 8) ^ byte) & 0xff]!
  return crc % CLUSTER_SLOTS
}

/** The queue and failure domain of Cluster slots whose master the client does not know (`nodeFor`). */
const UNKNOWN_NODE = 'unknown'

/**
 * The node a Cluster slot's calls queue for, and their failure domain: one place for both. A slot the client has no
 * master for (its slot table not loaded yet, or a slot no node serves) shares one queue and one scope with every
 * other such slot, bounded like a node: not one per slot (up to 16,384 of each). A client that never
 * tells (no `nodeOf`: Valkey GLIDE) queues per slot.
 */
export function nodeFor(runner: RedisScriptRunner, slot: number): string | number {
  if (runner.nodeOf === undefined) return slot
  return runner.nodeOf(slot) ?? UNKNOWN_NODE
}
