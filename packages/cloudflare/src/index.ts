export type {
  DurableObjectNamespaceLike,
  DurableObjectResponseLike,
  DurableObjectStateLike,
  DurableObjectStorageLike,
  DurableObjectStubLike,
  ResponseLike,
} from './like.js'
export { RateLimiterObject } from './object.js'
export {
  DURABLE_OBJECT_STORE_DEFAULTS,
  DurableObjectStore,
  type DurableObjectStoreOptions,
} from './store.js'
