import { rateLimit } from '@ratewindow/h3'
import { deadStore, only } from '../utils/limits'

const quiet = { onError: () => {} }
const open = rateLimit({
  limit: 1,
  store: deadStore(),
  onStoreError: 'allow',
  skip: only('/api/dead-open'),
  ...quiet,
})
const closed = rateLimit({
  limit: 1,
  store: deadStore(),
  onStoreError: 'deny',
  skip: only('/api/dead-closed'),
  ...quiet,
})

export default async (event) => (await open(event)) ?? closed(event)
