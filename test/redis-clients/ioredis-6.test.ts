import { clientFamily } from '../support/redis-clients.js'
import { describeRedisStore } from '../support/redis-store-suite.js'

describeRedisStore(clientFamily('ioredis 6'), { numRuns: { standalone: 20, cluster: 15 } })
