import { utf8 } from '../../support/hash.js'

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
