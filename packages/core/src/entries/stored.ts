/**
 * `@ratewindow/core/stored`: the kit for tools that read what limiters keep in Redis without the limiters
 * themselves (the `ratewindow` CLI, `@ratewindow/admin`): stored key names and their namespaces, reading one key's
 * state, scanning and ranking keys. An application does not need it (its limiters have `inspect` and `top`). See
 * docs/package-authors.md.
 */
export type { RecordedPlans } from '../algorithms/plans.js'
export {
  decodeNamespace,
  inspectStored,
  type StoredNamespace,
  type StoredStateReader,
  type StoredTarget,
} from '../operator/stored-state.js'
export {
  type ScanOptions,
  type ScanTotals,
  type StoredKeyScanner,
  type StoredLimiter,
  scanStoredKeys,
  type TopStoredOptions,
  topStored,
} from '../operator/top.js'
export {
  decodeStoredKey,
  type StoredKey,
  type StoredPart,
  storedHash,
  storedKeyPattern,
  storedSlot,
} from '../stores/redis/stored-keys.js'
