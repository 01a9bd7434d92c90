import { rateLimit } from '@ratewindow/h3'
import { only, storeFromEnv } from '../utils/limits'

// Behind one proxy: the rightmost X-Forwarded-For entry is the client.
export default rateLimit({
  limit: 3,
  window: '1m',
  trustProxy: 1,
  skip: only('/api/trusted'),
  ...storeFromEnv('trusted'),
})
