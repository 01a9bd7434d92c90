/**
 * The order test files start in. vitest starts the files it has timings for longest first, and the others (every
 * file on a fresh checkout, as in CI) largest first; a short file of long-running checks, such as the docs'
 * snippets, would then start last and end alone while the other workers sit idle. The files below take a minute
 * or more: they start first, longest first, then the rest in vitest's own order.
 */
import { BaseSequencer, type TestSpecification } from 'vitest/node'

/** Files that take a minute or more (their seconds in a full run on 2 cores, longest first). */
export const LONGEST_FIRST = [
  'test/docs/snippets.test.ts', // ~170 s: one tsc over every block, then each run and serve block in a process
  'test/runtimes/next.test.ts', // ~160 s: four `next build`s
  'test/http/behaviour.test.ts', // ~85 s
  'test/reliability/cluster-failover.test.ts', // ~55 s
  'packages/cloudflare/test/conformance.test.ts', // ~50 s
  'test/runtimes/bun-deno-example.test.ts', // ~35 s
]

export default class LongestFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files)
    const rank = (file: TestSpecification) => {
      const index = LONGEST_FIRST.findIndex((name) => file.moduleId.endsWith(`/${name}`))
      return index === -1 ? LONGEST_FIRST.length : index
    }
    // Array.prototype.sort is stable: the files not listed keep vitest's order.
    return sorted.sort((a, b) => rank(a) - rank(b))
  }
}
