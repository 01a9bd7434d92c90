import { MemoryStore } from '@ratewindow/core'
import { describeStoreConformance } from '@ratewindow/testing'
import { describe, expect, it } from 'vitest'

describeStoreConformance(
  { describe, it, expect },
  {
    name: 'MemoryStore',
    createStore: (clock) => new MemoryStore({ clock: clock.read }),
    reserves: true,
    overrides: true,
  },
)
