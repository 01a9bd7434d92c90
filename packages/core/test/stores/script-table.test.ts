/**
 * Issue 31: the Lua scripts and their SHA1s in one table (stores/redis/script-table.ts), every hash pinned here. A
 * change to a script fails this test: update the pin in the same commit, so that the change shows in review.
 */
import { createHash } from 'node:crypto'
import { describe, expect, it } from 'vitest'
import { redisScripts } from '../../src/stores/redis/script-table.js'
import { SYNC_SCRIPT } from '../../src/stores/synced/script.js'

const PINNED: Record<string, string> = {
  lease: 'b4c96e220a08e22d0b0eb3050037fdfa3a12f587',
  'lease batch': 'f40a1009fe5b03796e2a78713ef3f9801ac67a18',
  'fixed-window': '74ba411b2c623579f0e91267490c4cfd03f1f988',
  'fixed-window batch': '03fed330faab25111b7718ce588ddba54d43acfc',
  'fixed-window + penalty': '685ef716de8128e7f7c64611c265a15242bc2cc1',
  'fixed-window + penalty batch': 'fd8bfeb23ed1fae874146a06c5989edd9a7abcb6',
  'sliding-window-log': '87aa1501e458c83186d567a0f9f018bcb1b146ac',
  'sliding-window-log batch': 'bcae11a25f05b2bc246bae7ea16e521a74ae0029',
  'sliding-window-log + penalty': '032801a7a8c28e19db26ae2d0f3febec3388049a',
  'sliding-window-log + penalty batch': '1c52dac36336fbf3398c092927d62d72625eada2',
  'sliding-window-counter': '8111a1689ae6f1a13fd623888c02d26ac4c6238f',
  'sliding-window-counter batch': '2557826bdde0b92c051cf6bf629430c7ff28d596',
  'sliding-window-counter + penalty': 'c9fe1bab2879e0720a71c2e678637459fab743f7',
  'sliding-window-counter + penalty batch': '05d5f64ee2896ce722e2b4380c4d7c598d365398',
  'token-bucket': 'aeff6a847ac3a8935874a8419468f9cbf5fc2970',
  'token-bucket batch': '3d6d6ca5659b1079f77eab31412d5f9c312b3cfc',
  'token-bucket + penalty': 'cef415a38e5045ca673258f024a7ef276e986024',
  'token-bucket + penalty batch': '0cbcf139bf9e9ee88465c408eec99016edcb9bf8',
  gcra: '4579b326d6bc06b08b0c715d0b33a75640e10c09',
  'gcra batch': 'c3edb0e13741ab0386e4c4ae440fc4397a8bb720',
  'gcra + penalty': 'e8f64ad644328525cfdcbad418555c49e6a2c9f1',
  'gcra + penalty batch': '5cf8f3b387b639024b3d2b9293bbd617c44f93dc',
}

const sha1 = (text: string) => createHash('sha1').update(text).digest('hex')

describe('the Lua scripts and their SHA1s', () => {
  it('the table lists every script with the hash pinned here', () => {
    const hashes = Object.fromEntries(
      Object.entries(redisScripts()).map(([name, script]) => [name, script.sha1]),
    )
    expect(hashes).toEqual(PINNED)
  })

  it("each SHA1 is its script's (the script and its identity cannot drift apart)", () => {
    for (const [name, script] of Object.entries(redisScripts()))
      expect(sha1(script.lua), name).toBe(script.sha1)
    expect(sha1(SYNC_SCRIPT.lua)).toBe(SYNC_SCRIPT.sha1)
  })

  it("SyncedStore's script keeps its pinned hash", () => {
    expect(SYNC_SCRIPT.sha1).toBe('cb36d9e3827c88918426dae6021c856d65494ffe')
  })
})
