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
  'fixed-window batch': '4bcdc06e6b464925ea126b0c96d6757975586d38',
  'fixed-window + penalty': '685ef716de8128e7f7c64611c265a15242bc2cc1',
  'fixed-window + penalty batch': 'f3d2a1b76e121946ab10edc4f34d78290e58bbda',
  'sliding-window-log': '87aa1501e458c83186d567a0f9f018bcb1b146ac',
  'sliding-window-log batch': '9ff082f646184c53e9378e03070ad561b4ea4003',
  'sliding-window-log + penalty': '032801a7a8c28e19db26ae2d0f3febec3388049a',
  'sliding-window-log + penalty batch': '9d232a6577fde9c46f95391feedad3ff2d0dda6b',
  'sliding-window-counter': '8111a1689ae6f1a13fd623888c02d26ac4c6238f',
  'sliding-window-counter batch': 'e6e22d3535719fcf3b6a1c3dc3fbde5426924686',
  'sliding-window-counter + penalty': 'c9fe1bab2879e0720a71c2e678637459fab743f7',
  'sliding-window-counter + penalty batch': '7294ed013d301f75c67192d4395559559500726d',
  'token-bucket': 'aeff6a847ac3a8935874a8419468f9cbf5fc2970',
  'token-bucket batch': 'd6d3e2842beeccd8fd5a9d1d531d54ff88afeb34',
  'token-bucket + penalty': 'cef415a38e5045ca673258f024a7ef276e986024',
  'token-bucket + penalty batch': 'c5ae942df79a12499020d9e75ec1527e2780c195',
  gcra: '4579b326d6bc06b08b0c715d0b33a75640e10c09',
  'gcra batch': '4d97df7247891669bbc4c8526ed792a014127973',
  'gcra + penalty': 'e8f64ad644328525cfdcbad418555c49e6a2c9f1',
  'gcra + penalty batch': '37b77c2d30c22e72630e159bd139c90c50879b49',
  // Issue 34: with overrides (the key's record read in the same execution); the scripts above are unchanged.
  'fixed-window + overrides': '65d22d7af164c2f6802cc7bab92c78061af2cdc0',
  'fixed-window + overrides batch': 'b60af99d65bd3cf12505dfc8bb64770c17cfabff',
  'fixed-window + penalty + overrides': '94263b77fba57a458b2b0410abda6237e7691611',
  'fixed-window + penalty + overrides batch': '8d2e883acb00b494923d751c5aee9fa5fc1b92cb',
  'sliding-window-log + overrides': '83ab5a4a7b63afee8909c369c0220e5c80500ae8',
  'sliding-window-log + overrides batch': 'e3348d3a364c94adff5fa621695d446f4e7760ea',
  'sliding-window-log + penalty + overrides': 'c5ba6573b531ad57944924055c11ce8247788259',
  'sliding-window-log + penalty + overrides batch': '7360c6985699a2830712d4c99f24e0b98a6ac39c',
  'sliding-window-counter + overrides': 'b27d766fc090dc0bba204c99b14cffb6a21dc616',
  'sliding-window-counter + overrides batch': 'a3952707738d7c73e9c3ff1906b746374033022b',
  'sliding-window-counter + penalty + overrides': 'cf8cdc0d4e20984c554ea206a9b98e28cdf041ce',
  'sliding-window-counter + penalty + overrides batch': '0b8be9580d487ada88da5dc9ec8efad12eb61ca6',
  'token-bucket + overrides': '5ad9cdcaa0e10c3ec4d1701f34a134b7a4620da9',
  'token-bucket + overrides batch': '86fabb9be3f2d782c929e0d17ff1a6aa7353497e',
  'token-bucket + penalty + overrides': 'cf228727b398687d3f8374987e8ceae6126776c9',
  'token-bucket + penalty + overrides batch': '0347474152b000d38993345afb1fd1bfc52ffa3a',
  'gcra + overrides': 'fe53573d70d3381e96a08e62c8a533239c7a2019',
  'gcra + overrides batch': '57f76c63ec3b6c40e0b82c63e056f48542faef0a',
  'gcra + penalty + overrides': '4c4ba20c816f6b7834cda9dc53004235e352ee36',
  'gcra + penalty + overrides batch': '8bed243323a86c34ee35d73af6cf8f826c68840b',
  'override set': 'cbccf7b670db0ea7d9f1753bcb502933703d7b0e',
  'override read': '2d4b8b01801654a8c2bb33dda416f040f21d9766',
  'override list': '72f270e447c9384c32ddf654e7c00d2ebd1274db',
  'cluster slots': 'abd688a609cc4d706631e4ed75c54ce2338fcf81',
  time: 'e58a28eaa3df56f3f110b827b058ccf94c64ccdd',
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
