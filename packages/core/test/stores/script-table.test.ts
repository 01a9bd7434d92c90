/**
 * Issue 31: the Lua scripts and their SHA1s in one table (stores/redis/script-table.ts), every hash pinned here. A
 * change to a script fails this test: update the pin in the same commit, so that the change shows in review.
 */
import { createHash } from 'node:crypto'
import { describe, expect, it } from 'vitest'
import { redisScripts } from '../../src/stores/redis/script-table.js'
import { SYNC_RECORDS_SCRIPT, SYNC_SCRIPT } from '../../src/stores/synced/script.js'

const PINNED: Record<string, string> = {
  lease: '953aa6418f8ae03a630df753b993538a33e7288a',
  'lease batch': '3b8d78430a29ed1956567ba35e5df641eb6ea47f',
  // Issue 46: every decision script's `batch` changed (its pending writes kept in flat tables, no table per key: less
  // Redis CPU per decision), its state did not (test/redis-state-compat.test.ts reads 41bbd39's state through a group).
  // Issue 45: every decision script changed, its state did not (test/redis-state-compat.test.ts reads what the
  // previous scripts wrote): a charge goes past the limit up to `maxDebt` (its last argument), the fixed window carries
  // what it counted beyond the limit, a denial of cost 0 reports its wait, and a peek ends with the units used.
  'fixed-window': 'e1a388fdecdb1d1ea1d7df1ec23c5e7a5f2dbf78',
  'fixed-window batch': '9732d14d91e3399824cf36313fc2f0c1ed068541',
  'fixed-window + penalty': '7e60849ecc8d3cf5e12c834422839bee8555fa71',
  'fixed-window + penalty batch': 'fbd14ddfb54f65494c028910e8820c3ae5fc7cc4',
  // Session 9: the log's scripts know the give mode (its newest units, whatever their times); the others are unchanged.
  // The debt attack round (M5): the sliding windows' charges owe one limit at most (`carriedDebt`), with or without
  // overrides; their state is unchanged (test/redis-state-compat.test.ts reads what the previous scripts wrote).
  'sliding-window-log': 'f14c2cde7c0100d214bc2e0bb70d05e5229e310f',
  'sliding-window-log batch': 'e82ab0bb3735578c62e03d961b32dff3c344ce9c',
  'sliding-window-log + penalty': 'aba1788ef35ce815ccb89198739012152cec261a',
  'sliding-window-log + penalty batch': '28a0a76cda384ae79b090e851200df3e23179a35',
  'sliding-window-counter': '0c7f04777fe7bffe89f58883fc2be1f8bafa8edf',
  'sliding-window-counter batch': '879dfd06bada92a139e248fcc577f62d95bc841b',
  'sliding-window-counter + penalty': 'b0093776648c8dec4c3e845ba4785cf3bf79ebc3',
  'sliding-window-counter + penalty batch': 'db36228dd77248d4bf1a3326760e3e80637f6186',
  'token-bucket': '6d84660da8cb5269b08ab5fabe01bf7518714b8f',
  'token-bucket batch': '898fcf15a44cd44b14331a4a044af9722a1b9c38',
  'token-bucket + penalty': '7bf109665d47a7ab743175b079ea70c6177caa59',
  'token-bucket + penalty batch': 'ffc749ec2f1346d71d6c700f521cfa4f5085a800',
  gcra: '2b6727240492dfc7562cb31d4f2114f8ab6b3322',
  'gcra batch': 'bb4bb978d9fd676ec987fbc8001896055dc6d36a',
  'gcra + penalty': 'b4caa1902b0b3ef22f2ce2172f632f658d436a48',
  'gcra + penalty batch': 'ef11b495582d0af87d42a5f54ed39e3a7fd4c436',
  // Issue 34: with overrides (the key's record read in the same execution); the scripts above are unchanged.
  'fixed-window + overrides': 'd716d2516be5188e2ca28f0f310fad5c360d53f4',
  'fixed-window + overrides + plan': '82271665bf1d9b8963afa7a3c7e6ead88d88ba1e',
  'fixed-window + overrides batch': '285dd21f5373e25008c93335797ca63602615604',
  'fixed-window + overrides + plan batch': '7dd51a5058314cf50f8192b180561db5ff1f36bd',
  'fixed-window + penalty + overrides': '08235a0782dd374404b521e4832c0eaf546f23b9',
  'fixed-window + penalty + overrides + plan': '84bceb852078b5b2268c81e485084f3441700d90',
  'fixed-window + penalty + overrides batch': '5982971f161ebc4baa7f4cd2fdc29a4611aae8fd',
  'fixed-window + penalty + overrides + plan batch': '4ab2e64b959191f1d6402cde707dc117d2b4697b',
  'sliding-window-log + overrides': 'b8a28f31695b2b04260d3f9e13186a84fead2327',
  'sliding-window-log + overrides + plan': '01ad5482cc3d41168baf037b8154c33b9d65f8c4',
  'sliding-window-log + overrides batch': 'b9b15e287861005da181371a287f15e4d1b2db76',
  'sliding-window-log + overrides + plan batch': '8d0c9181f8d4c03a9f0e2b9694bf46029b70437d',
  'sliding-window-log + penalty + overrides': 'c67688cf90d661fdd7c0d06939ec7c978c3f5942',
  'sliding-window-log + penalty + overrides + plan': 'b6a861fa3bd5dfecad6298af1235b405e198a3a4',
  'sliding-window-log + penalty + overrides batch': 'ce79366db2536c0ebd2e329d85dd7be4c237c6c4',
  'sliding-window-log + penalty + overrides + plan batch': '6d56c2aa207e19a58eb69bcb864fd8803b8dd56d',
  'sliding-window-counter + overrides': '28645c5e3f983b3d980e530481a8fbc83914faff',
  'sliding-window-counter + overrides + plan': '73a83db5ad96f5f3b76f7f582120913fa509d228',
  'sliding-window-counter + overrides batch': 'f8a764607001fb01f3af54c220f4772317bd56d7',
  'sliding-window-counter + overrides + plan batch': '902343da88955ed6e38b969712f4cd5396fec920',
  'sliding-window-counter + penalty + overrides': '06fcc1680e7ffbac26bd2e5f248507441008c5c6',
  'sliding-window-counter + penalty + overrides + plan': '6a2d1f904e950a24781d279a92a5731dfdff8df7',
  'sliding-window-counter + penalty + overrides batch': '9bd72f679ae190474a6cee47ef6d557c7ea98a02',
  'sliding-window-counter + penalty + overrides + plan batch': '569ec2bf3ba6266a9f1623e6faaad1842c68eca6',
  'token-bucket + overrides': '0ee2a61f37d83804fa7bb6ec9bddfc9194e18d8e',
  'token-bucket + overrides + plan': '590284ebadf1cac1a3d0e91b1e9106573b537325',
  'token-bucket + overrides batch': 'a42f86569b33c2d35c58034e9d92f438d4113e14',
  'token-bucket + overrides + plan batch': '7b0bb2ea215d2c8c2fafdaee97621739b34d066a',
  'token-bucket + penalty + overrides': '7a23d112aa73f0371bb4531e0f7d81a68dd88e6b',
  'token-bucket + penalty + overrides + plan': '7a82b3e13a34619de7f32db9421a9be48b2830d2',
  'token-bucket + penalty + overrides batch': 'e8afa63029d215783e4010aa9b1c17f3be74b170',
  'token-bucket + penalty + overrides + plan batch': 'd1ed55b5f23e0c30c5318670fcad9682dbdf39bb',
  'gcra + overrides': '88296efe6072e984877279f2ac36e9325c09e67e',
  'gcra + overrides + plan': '185a9e1912a8e4778dc4f3cb98d1b24550b9e2fb',
  'gcra + overrides batch': 'a14df3eb4392a81d1b03d5588dadc242b9c6a3ab',
  'gcra + overrides + plan batch': 'f4e5004c8c9c841a5b767f7fb19114bb2273ad48',
  'gcra + penalty + overrides': '8edc5128c1a56594804a4896e34e7835133f4e29',
  'gcra + penalty + overrides + plan': '1b3b7ecf0573e03f9ff549e642e958733e70f6b2',
  'gcra + penalty + overrides batch': '34fa2a0c435d39331c74f7d4ef9ca8bfbee6b003',
  'gcra + penalty + overrides + plan batch': 'a2a3106fb6716f3b06e7b12aaca338876863b0e9',
  // Issue 47: the quota (algorithm 6), new scripts beside the others, which are unchanged.
  quota: '45c48e3f7148852af213cb3deffc6521ed51a90f',
  'quota batch': '19119d7648f6c0ba81601d18dd2bf24e96afa805',
  'quota + overrides': '2fc747563617d59278e666dae9ed003b3d7fc5ae',
  'quota + overrides + plan': '70ce6167483c99b96f70550ebf1bc2cfd09187f9',
  'quota + overrides batch': '820f5432b97ff3462caa1617bb204b5e81689b83',
  'quota + overrides + plan batch': '87c51d932cff83b4e7ee43e4150972bd73e51577',
  'quota + penalty': '97049b4f55f24c1fee7fe453339414b45b9d2ea4',
  'quota + penalty batch': 'e8c1c1190f571015282019e7177c869e8022598b',
  'quota + penalty + overrides': '8cb84040accee35cbd301420e1204cb4c7a2b617',
  'quota + penalty + overrides + plan': '3a90fb340b99c14201b0bbfbbe49acde7bec5f71',
  'quota + penalty + overrides batch': 'a9d56c8802d68008ff5bdc10bcb0793af60ac300',
  'quota + penalty + overrides + plan batch': '673153e795c6057e837d53a986907eb61b858418',
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
