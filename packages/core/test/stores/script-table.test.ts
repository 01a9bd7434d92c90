/**
 * Issue 31: the Lua scripts and their SHA1s in one table (stores/redis/script-table.ts), every hash pinned here. A
 * change to a script fails this test: update the pin in the same commit, so that the change shows in review.
 */
import { createHash } from 'node:crypto'
import { describe, expect, it } from 'vitest'
import { redisScripts } from '../../src/stores/redis/script-table.js'
import { SYNC_RECORDS_SCRIPT, SYNC_SCRIPT } from '../../src/stores/synced/script.js'

const PINNED: Record<string, string> = {
  lease: 'b4c96e220a08e22d0b0eb3050037fdfa3a12f587',
  'lease batch': 'f40a1009fe5b03796e2a78713ef3f9801ac67a18',
  'fixed-window': '74ba411b2c623579f0e91267490c4cfd03f1f988',
  'fixed-window batch': '4bcdc06e6b464925ea126b0c96d6757975586d38',
  'fixed-window + penalty': '685ef716de8128e7f7c64611c265a15242bc2cc1',
  'fixed-window + penalty batch': 'f3d2a1b76e121946ab10edc4f34d78290e58bbda',
  // Session 9: the log's scripts know the give mode (its newest units, whatever their times); the others are unchanged.
  'sliding-window-log': 'c3a9bcdfff6ce26095455746ffdcad83932e7673',
  'sliding-window-log batch': '18b2238145b1dee3697c9195c4a04214af113311',
  'sliding-window-log + penalty': '2b8c01af4583e7eafaec3673d59d794f1d848377',
  'sliding-window-log + penalty batch': '5866456bae7af374d24783e0be28e7ed5f56c740',
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
  'fixed-window + overrides': '70b17721cb2af38e6e089cacbe45159f7f929c2a',
  'fixed-window + overrides batch': '3a9b451c064444aa6a05fb217f9a93d4cdb4df34',
  'fixed-window + penalty + overrides': '332eae527f9580a2ce3af11c5d8123747471d35b',
  'fixed-window + penalty + overrides batch': 'ce3175c4825c11210506c695379a9f342c4ced26',
  'sliding-window-log + overrides': 'fac02c2ad54733db6e3a010057dc863dc7fd1c18',
  'sliding-window-log + overrides batch': '0fdb6b28ad8a7b727cf0451787cc954e5291f59b',
  'sliding-window-log + penalty + overrides': 'a45437b7dd2a466f08a26bcc1063d81e8f2c5274',
  'sliding-window-log + penalty + overrides batch': '074f8f4387440fb85085c9823aec3cb4543ad635',
  'sliding-window-counter + overrides': '7ffd2a38062b45f61d2c48de932e8f4c1067eeac',
  'sliding-window-counter + overrides batch': '7b3f9c8d1fceb92ca40e03a06a83f4e136b4d5ca',
  'sliding-window-counter + penalty + overrides': 'c4945f800b3d6862efc82b5487626971ff859773',
  'sliding-window-counter + penalty + overrides batch': 'd03f925628802805f37a1b9bc0281630a6d5a199',
  'token-bucket + overrides': '82ffa2a74a32410fa69fac052892e8b54d3b7781',
  'token-bucket + overrides batch': '03631c248af6626035acec3294226d586f44b9fa',
  'token-bucket + penalty + overrides': '546f952f99ad7b57d7e60866c566bdeec82d552c',
  'token-bucket + penalty + overrides batch': '142a6812d1bb1b96e51a6dc2350322b194f1265a',
  'gcra + overrides': '50fe6db53329f1af7a574da1468d7d00da4772aa',
  'gcra + overrides batch': 'd475be97a7248eebd6148680af2c861d3833071a',
  'gcra + penalty + overrides': '5aea4bd22c1472d6c86aabe2d058d5c11cd0f080',
  'gcra + penalty + overrides batch': 'b12fa950b8fa668ab46996818acf16d721b2e8ee',
  'override set': '67442fb1fa60702b06381162774dfaa35bd87c83',
  'override read': '1f527a287c447f8b7dcded79b3d1c9d403eec349',
  // Issue 45: a record of a slot the node imports is left out, not a failed step; on a Cluster each scan step runs
  // only on the master its cursor names (`onMaster`), found by node id (`cluster slots`).
  'override list': '59f6a40cf2216e0f7a4badf9436e336265af20e2',
  'override list on a master': 'd6e2625fa2b5c554f975635457354c98b96a9b02',
  'cluster slots': 'd025f5f6bbe6de878a2c2d79d1b3575b2c3942a2',
  'stored scan': '04e9bfc7b2a5ea46b84aa2b6986d56bac1347bbf',
  'stored scan on a master': '3f33c466116d56d3c740fb5354fec4a12c776095',
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
    expect(sha1(SYNC_RECORDS_SCRIPT.lua)).toBe(SYNC_RECORDS_SCRIPT.sha1)
  })

  it("SyncedStore's scripts keep their pinned hashes (the one with override records beside the one without)", () => {
    // Issue 45: a key's window never moves back (a sender's clock behind the window the key was written in).
    expect(SYNC_SCRIPT.sha1).toBe('d15afea3ebe019b30997b0320c185028ccdaa40e')
    expect(SYNC_RECORDS_SCRIPT.sha1).toBe('f863194d306470c541673da7ecee55ce5a416118')
  })
})
