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
  'fixed-window': '665282197902059c7c52086f0a03049d93b3a02c',
  'fixed-window batch': '43d63f13cb4be7e3565a5da3572e76bc817b6076',
  'fixed-window + penalty': '6ddf193c50b6cd293c2a434c04604e5960109f04',
  'fixed-window + penalty batch': '2a927c7c1682a9091510f797d5e7fb99cb4cf4ae',
  // Session 9: the log's scripts know the give mode (its newest units, whatever their times); the others are unchanged.
  // The debt attack round (M5): the sliding windows' charges owe one limit at most (`carriedDebt`), with or without
  // overrides; their state is unchanged (test/redis-state-compat.test.ts reads what the previous scripts wrote).
  'sliding-window-log': 'a5629e16e5af548b02c07d8d25719f0004ff2f10',
  'sliding-window-log batch': 'a6929365173260275816ae13c9d258c226e1add9',
  'sliding-window-log + penalty': '5743a857baf7d8b7ef81657f71691dad5ff4a337',
  'sliding-window-log + penalty batch': '1fcadc237f57b18e8ca676e8377341b63bd7305a',
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
  'fixed-window + overrides': '9286df5f50fdbd6d03ac643f4aaee15e17b24842',
  'fixed-window + overrides + plan': 'd6c3a023037d44a2b1c67c85cc2adf83aaa00c66',
  'fixed-window + overrides batch': '9849ba7eb09fd53b801117d6fd09c7f47cc87804',
  'fixed-window + overrides + plan batch': 'bc448849cb6dd2cb15bfc131f23cfb909adc9362',
  'fixed-window + penalty + overrides': 'f5613026cb14c83ad9a7a9a14696f1789838e36c',
  'fixed-window + penalty + overrides + plan': '05d441f5407937be35fc886fe31c652908f5c35a',
  'fixed-window + penalty + overrides batch': '695aab83a0b94854ea1e9b8a29b1ef6febbb0cc4',
  'fixed-window + penalty + overrides + plan batch': 'a89e1573faa9bd44f6e08f4d15873ca64d6c07a5',
  'sliding-window-log + overrides': '317006330fcd40c7e17397b42b1856652d3e4b7b',
  'sliding-window-log + overrides + plan': 'f8f6b97a20b11e277a7dc75ccd4b8e7c89363cd2',
  'sliding-window-log + overrides batch': '425e6873e5ddc0415c812f4c23416f9d422ec16a',
  'sliding-window-log + overrides + plan batch': '8a9202dfc4cf80e427cf7c69f998ea5ce9be74e7',
  'sliding-window-log + penalty + overrides': 'ad0e06be80f37a7f41972b844c001e0e9f730354',
  'sliding-window-log + penalty + overrides + plan': '190d910ddf1c87b2118da9232e5aacca6816861a',
  'sliding-window-log + penalty + overrides batch': 'cae70ceb69e4efbc63c4f1f2abdd49ae615db99b',
  'sliding-window-log + penalty + overrides + plan batch': '403c77e3ab05dd35ac0266507ed77f7fa13be23c',
  'sliding-window-counter + overrides': '28645c5e3f983b3d980e530481a8fbc83914faff',
  'sliding-window-counter + overrides + plan': '84fa8fe194d9c4aa3713f5a1a0a79f537d6f560d',
  'sliding-window-counter + overrides batch': 'f8a764607001fb01f3af54c220f4772317bd56d7',
  'sliding-window-counter + overrides + plan batch': 'd940a17e9577602ea6875fa2756eceb506771f58',
  'sliding-window-counter + penalty + overrides': '06fcc1680e7ffbac26bd2e5f248507441008c5c6',
  'sliding-window-counter + penalty + overrides + plan': '27bedcc9fbe182515578f0ca7c772e29130afa8a',
  'sliding-window-counter + penalty + overrides batch': '9bd72f679ae190474a6cee47ef6d557c7ea98a02',
  'sliding-window-counter + penalty + overrides + plan batch': '3bdf098d3117ba9b8913ae39286bc8035e503f54',
  'token-bucket + overrides': '0ee2a61f37d83804fa7bb6ec9bddfc9194e18d8e',
  'token-bucket + overrides + plan': '10853b6f3977b26ed5c1c813a2b8cdb8b8e1ffd1',
  'token-bucket + overrides batch': 'a42f86569b33c2d35c58034e9d92f438d4113e14',
  'token-bucket + overrides + plan batch': 'a012a5afec2fe8472727feaef934f42007108195',
  'token-bucket + penalty + overrides': '7a23d112aa73f0371bb4531e0f7d81a68dd88e6b',
  'token-bucket + penalty + overrides + plan': '224d8fb66d0f04dfe9ac40a42343267bdc3387f5',
  'token-bucket + penalty + overrides batch': 'e8afa63029d215783e4010aa9b1c17f3be74b170',
  'token-bucket + penalty + overrides + plan batch': '7f966e05f279a2c6f20a0481a2b223827de894f6',
  'gcra + overrides': '88296efe6072e984877279f2ac36e9325c09e67e',
  'gcra + overrides + plan': '3c95400a69ddaa21d87a9bb4c5b060878eb50653',
  'gcra + overrides batch': 'a14df3eb4392a81d1b03d5588dadc242b9c6a3ab',
  'gcra + overrides + plan batch': '049931b73b10aead20ed611d960bdcb587bd4d9b',
  'gcra + penalty + overrides': '8edc5128c1a56594804a4896e34e7835133f4e29',
  'gcra + penalty + overrides + plan': '205a50e157883e830ef543a8d57ae73c5c3e2371',
  'gcra + penalty + overrides batch': '34fa2a0c435d39331c74f7d4ef9ca8bfbee6b003',
  'gcra + penalty + overrides + plan batch': '4e2be378d18f20b2b87497d485f448b9820fd646',
  // Issue 47: the quota (algorithm 6), new scripts beside the others, which are unchanged.
  quota: 'd9681684b4a53c57459b651f81aad103c2c65893',
  'quota batch': '0232feb2556725bbbf2f3c8c0297fdb672fdbb45',
  'quota + overrides': 'a16cd0f23ca865cd4a9da0eb408f68625810e557',
  'quota + overrides + plan': 'ea54ca1ba187d856b887dc3c366140f496acf801',
  'quota + overrides batch': '1248559cf02b624047422dacf822089f17ec56f2',
  'quota + overrides + plan batch': 'f48ea642a02f2ee59bb74e99a92f65f706ff7599',
  'quota + penalty': 'ab2f737947c0076f6c138b6557ae1b779eabcf53',
  'quota + penalty batch': '63bdd13a4b6a1d247fce208a5d8f78629edb04d7',
  'quota + penalty + overrides': '5135b2aa298a371d619335758763e4bb082a9913',
  'quota + penalty + overrides + plan': '606f43de5d8be5a80a9efe9a7177bfb5f6be9c61',
  'quota + penalty + overrides batch': '938dd66458508e7e881caefe2030162ae23cbb91',
  'quota + penalty + overrides + plan batch': 'be792831980e9be511f97b23f8d84764a5f6191a',
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
