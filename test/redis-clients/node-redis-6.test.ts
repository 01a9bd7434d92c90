import { clientFamily } from '../support/redis-clients.js'
import { describeRedisStore } from '../support/redis-store-suite.js'

describeRedisStore(clientFamily('node-redis 6'), { numRuns: { standalone: 40, cluster: 30 } })
