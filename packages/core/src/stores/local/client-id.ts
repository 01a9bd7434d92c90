import { clientKeyDigest } from '../../support/hash.js'

/** Identifiers longer than this are kept hashed, so that a memory bound in keys is a bound in bytes too. */
const MAX_RAW_LENGTH = 128
/** What starts a hashed identifier. */
const HASHED = '#'

/**
 * How the local stores (MemoryStore, and the Durable Object store through the remote-store kit) hold a client
 * identifier: as it is, or `#` + its SHA-256 when it is longer than 128 characters. An identifier that starts
 * with `#` is hashed too, whatever its length, so that an identifier kept as it is never starts with `#`: no
 * spelling of one identifier (such as `'#' + sha256(long)`) reaches another's counter, short of a SHA-256
 * collision. RedisStore needs no such rule: it hashes every identifier.
 */
export function storedClientId(key: string): string {
  return key.length > MAX_RAW_LENGTH || key.startsWith(HASHED) ? `${HASHED}${clientKeyDigest(key)}` : key
}
