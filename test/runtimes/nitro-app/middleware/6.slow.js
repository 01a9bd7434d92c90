import { slowDown } from '@ratewindow/h3'
import { only, storeFromEnv } from '../utils/limits'

export default slowDown({
  windowMs: 3_600_000, // an hour: a window ending between two requests of a test is then once in thousands of runs
  delayAfter: 1,
  delayMs: 20,
  trustProxy: 1,
  skip: only('/api/slow'),
  ...storeFromEnv('slow'),
})
