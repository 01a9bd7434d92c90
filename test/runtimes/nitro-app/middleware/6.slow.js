import { slowDown } from '@ratewindow/h3'
import { only, storeFromEnv } from '../utils/limits'

export default slowDown({
  windowMs: 60_000,
  delayAfter: 1,
  delayMs: 20,
  trustProxy: 1,
  skip: only('/api/slow'),
  ...storeFromEnv('slow'),
})
