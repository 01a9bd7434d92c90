import { RedisStore } from '@ratewindow/core'
import { clusterClient, standaloneClient } from './support/redis.js'
import { describeStoreConformance } from './support/store-conformance.js'

describeStoreConformance({
  name: 'RedisStore (standalone)',
  createStore: (clock) => new RedisStore({ client: standaloneClient(), clock: clock.read }),
  numRuns: 60,
})

describeStoreConformance({
  name: 'RedisStore (Cluster)',
  createStore: (clock) => new RedisStore({ client: clusterClient(), clock: clock.read }),
  numRuns: 40,
})
