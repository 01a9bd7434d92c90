import { clientFamily } from '../support/redis-clients.js'
import { describeRedisStore } from '../support/redis-store-suite.js'

describeRedisStore(clientFamily('ioredis 5'), { numRuns: { standalone: 60, cluster: 40 } })
