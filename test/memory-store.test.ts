import { MemoryStore } from '@ratewindow/core'
import { describeStoreConformance } from './support/store-conformance.js'

describeStoreConformance({
  name: 'MemoryStore',
  createStore: (clock) => new MemoryStore({ clock: clock.read }),
})
