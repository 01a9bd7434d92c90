import type { Options } from 'tsup'

/** The build every package shares: ESM + CJS with declarations for each, from src/index.ts. */
export const packageBuild: Options = {
  entry: ['src/index.ts'],
  format: ['esm', 'cjs'],
  dts: true,
  sourcemap: true,
  clean: true,
  target: 'node20',
  tsconfig: 'tsconfig.json',
}
