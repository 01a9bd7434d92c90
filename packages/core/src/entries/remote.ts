/**
 * `@ratewindow/core/remote`: the kit for a store that keeps the state itself and decides in JavaScript beside it,
 * somewhere else than the limiter's process (the Durable Object store of `@ratewindow/cloudflare`): the wire
 * format of a store call, the per-key decision over stored state, leases and override records. An application
 * does not need it. See docs/package-authors.md.
 */

export type { CalendarAnchor, CalendarUnit } from '../algorithms/calendar.js'
export {
  applyOverrideChange,
  liveOverrideRecord,
} from '../algorithms/override.js'
export type { QuotaCalendar } from '../algorithms/quota.js'
export {
  acquireLease,
  applyToKeyState,
  type EncodedRule,
  type EncodedStoreRequest,
  encodeStoreRequest,
  type KeyState,
  type KeyStateResult,
  keyStateId,
  type LeaseState,
  releaseLease,
  remoteDecision,
} from '../stores/local/remote.js'
export {
  type RemoteAnswer,
  type RemoteCall,
  type RemoteStateStorage,
  remoteShardOf,
  runRemoteCall,
  type StoredLeases,
  type StoredOverride,
} from '../stores/local/remote-call.js'
