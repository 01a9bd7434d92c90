/**
 * `@ratewindow/ws/engine`: the engine alone, for bindings outside this package (the NestJS gateway guard): no
 * server's types, so a project needs neither `ws`, Socket.IO nor Hono to compile against it.
 */
export type { LimitedConnection } from './connection.js'
export { type Admission, type UpgradeAdmission, WebSocketLimiter } from './engine.js'
export {
  type ConnectionLimitOptions,
  type MessageRefusal,
  type RefusalReason,
  type UpgradeLimitOptions,
  WEBSOCKET_DEFAULTS,
  type WebSocketLimitOptions,
} from './options.js'
export { refusalMessage, truncateUtf8, type UpgradeRefusal } from './refusal.js'
