import { rateLimit } from '@ratewindow/h3'
import { only, storeFromEnv } from '../utils/limits'

// Keyed by the connection's address: a forged X-Forwarded-For changes nothing.
export default rateLimit({ limit: 3, window: '1m', skip: only('/api/limited'), ...storeFromEnv('limited') })
