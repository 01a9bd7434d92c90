import { clientFamily } from '../support/redis-clients.js'
import { describeRedisStore } from '../support/redis-store-suite.js'

describeRedisStore(clientFamily('node-redis 5'), { numRuns: { standalone: 20, cluster: 15 } })
