import { rateLimit } from '@ratewindow/h3'
import { only, storeFromEnv } from '../utils/limits'

// A failed response (status >= 400) is given back.
export default rateLimit({
  limit: 2,
  window: '1m',
  trustProxy: 1,
  skipFailedRequests: true,
  skip: only('/api/failing'),
  ...storeFromEnv('failing'),
})
