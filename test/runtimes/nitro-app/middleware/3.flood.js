import { rateLimit } from '@ratewindow/h3'
import { only, storeFromEnv } from '../utils/limits'

export default rateLimit({ limit: 20, window: '1m', skip: only('/api/flood'), ...storeFromEnv('flood') })
