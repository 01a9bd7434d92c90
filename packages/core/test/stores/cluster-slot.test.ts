import { describe, expect, it } from 'vitest'
import { clusterSlot } from '../../src/stores/redis/cluster-slot.js'

describe('clusterSlot', () => {
  it.each([
    ['123456789', 12739],
    ['foo', 12182],
    ['bar', 5061],
    ['foo{}{bar}', 8363], // an empty tag: the whole key
    ['foo{{bar}}zap', 4015], // the tag is `{bar`
    ['foo{bar}{zap}', 5061], // the first tag only
    ['rw{é日本}:x', 1826], // UTF-8 bytes
    ['{user1000}.following', 3443],
  ])('%s is in slot %i, as CLUSTER KEYSLOT says', (key, slot) => {
    expect(clusterSlot(key)).toBe(slot)
  })
})
