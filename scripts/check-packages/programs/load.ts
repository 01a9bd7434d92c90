/** The module system a runtime program is written for: a `.mjs` file or a `.cjs` file. */
export type ModuleSystem = 'esm' | 'cjs'

/**
 * How a runtime program loads a module, as an expression: `(await import('…'))` in ESM, `require('…')` in
 * CommonJS. The programs are written once and loaded both ways, so that each tarball's two builds are run.
 */
export function loader(moduleSystem: ModuleSystem): (name: string) => string {
  return (name) => (moduleSystem === 'esm' ? `(await import('${name}'))` : `require('${name}')`)
}

/** A runtime program's two files, `<name>.mjs` and `<name>.cjs`, each written for its module system. */
export function esmAndCjs(
  name: string,
  program: (moduleSystem: ModuleSystem) => string,
): Record<string, string> {
  return { [`${name}.mjs`]: program('esm'), [`${name}.cjs`]: program('cjs') }
}
