/**
 * What in a built JavaScript file needs Node: imports of Node's built-in modules (with or without the `node:`
 * prefix, which the build strips) and uses of Node-only globals that no `typeof` check guards. Core must load
 * on Cloudflare Workers without `nodejs_compat`; test/web-standard.test.ts runs this on a fresh build,
 * scripts/check-packages/ on the packed tarballs.
 */
import { builtinModules } from 'node:module'
import ts from 'typescript'

/**
 * Node built-ins core's build still imports, with what will remove each: the checks fail once one is gone,
 * so that its entry is deleted here.
 */
export const KNOWN_NODE_IMPORTS = new Map<string, string>()

/** Globals that Node has and Workers (without `nodejs_compat`) do not. */
const NODE_GLOBALS = new Set([
  'process',
  'Buffer',
  'setImmediate',
  'clearImmediate',
  'global',
  '__dirname',
  '__filename',
])
/** The CommonJS build's own wrapper names: Node-only only in an ES module. */
const COMMONJS_GLOBALS = new Set(['require', 'module', 'exports'])
const BUILTINS = new Set(builtinModules.flatMap((name) => [name, `node:${name}`]))

export interface NodeUse {
  /** `import net`, `require net`, or `global process`. */
  kind: 'import' | 'require' | 'global'
  /** The module specifier or the global's name. */
  name: string
  /** 1-based line in the file. */
  line: number
}

/** Every Node-only import and unguarded Node-only global in `source` (a built `.js`, `.cjs` or `.mjs` file). */
export function nodeOnlyUses(source: string, fileName: string): NodeUse[] {
  const commonjs = fileName.endsWith('.cjs')
  const file = ts.createSourceFile(fileName, source, ts.ScriptTarget.Latest, true, ts.ScriptKind.JS)
  const uses: NodeUse[] = []
  const lineOf = (node: ts.Node) => file.getLineAndCharacterOfPosition(node.getStart(file)).line + 1
  const visit = (node: ts.Node): void => {
    if (
      (ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) &&
      node.moduleSpecifier !== undefined &&
      ts.isStringLiteral(node.moduleSpecifier) &&
      BUILTINS.has(node.moduleSpecifier.text)
    ) {
      uses.push({ kind: 'import', name: node.moduleSpecifier.text, line: lineOf(node) })
    } else if (ts.isCallExpression(node)) {
      const [first] = node.arguments
      const callee = node.expression
      const loads =
        callee.kind === ts.SyntaxKind.ImportKeyword || (ts.isIdentifier(callee) && callee.text === 'require')
      if (loads && first !== undefined && ts.isStringLiteralLike(first) && BUILTINS.has(first.text))
        uses.push({ kind: 'require', name: first.text, line: lineOf(node) })
    } else if (
      ts.isIdentifier(node) &&
      (NODE_GLOBALS.has(node.text) || (!commonjs && COMMONJS_GLOBALS.has(node.text))) &&
      isFreeReference(node) &&
      !isGuarded(node)
    ) {
      uses.push({ kind: 'global', name: node.text, line: lineOf(node) })
    }
    ts.forEachChild(node, visit)
  }
  visit(file)
  return uses
}

/** Whether `node` names a variable (not a property, a declaration or a label). */
function isFreeReference(node: ts.Identifier): boolean {
  const parent = node.parent
  if (ts.isPropertyAccessExpression(parent) && parent.name === node) return false
  if (ts.isPropertyAssignment(parent) && parent.name === node) return false
  if (
    (ts.isMethodDeclaration(parent) ||
      ts.isPropertyDeclaration(parent) ||
      ts.isGetAccessor(parent) ||
      ts.isSetAccessor(parent)) &&
    parent.name === node
  )
    return false
  if (
    (ts.isVariableDeclaration(parent) ||
      ts.isParameter(parent) ||
      ts.isFunctionDeclaration(parent) ||
      ts.isClassDeclaration(parent)) &&
    parent.name === node
  )
    return false
  if (ts.isBindingElement(parent) || ts.isLabeledStatement(parent)) return false
  if (ts.isImportSpecifier(parent) || ts.isExportSpecifier(parent) || ts.isImportClause(parent)) return false
  return true
}

/**
 * Whether `node` is only reached where `typeof <name>` was checked: the operand of `typeof` itself, or inside a
 * conditional, `if` or `&&` whose condition asks `typeof` of that name.
 */
function isGuarded(node: ts.Identifier): boolean {
  if (ts.isTypeOfExpression(node.parent)) return true
  const asksTypeOf = (condition: ts.Node): boolean => {
    let found = false
    const look = (each: ts.Node): void => {
      if (
        ts.isTypeOfExpression(each) &&
        ts.isIdentifier(each.expression) &&
        each.expression.text === node.text
      )
        found = true
      else ts.forEachChild(each, look)
    }
    look(condition)
    return found
  }
  for (
    let child: ts.Node = node, parent = node.parent;
    parent !== undefined;
    child = parent, parent = parent.parent
  ) {
    if (ts.isConditionalExpression(parent) && child !== parent.condition && asksTypeOf(parent.condition))
      return true
    if (ts.isIfStatement(parent) && child !== parent.expression && asksTypeOf(parent.expression)) return true
    if (
      ts.isBinaryExpression(parent) &&
      parent.operatorToken.kind === ts.SyntaxKind.AmpersandAmpersandToken &&
      child === parent.right &&
      asksTypeOf(parent.left)
    )
      return true
  }
  return false
}

/** `uses`, one line each, for a failure message. */
export function describeUses(file: string, uses: readonly NodeUse[]): string {
  return uses.map((use) => `${file}:${use.line}: ${use.kind} ${use.name}`).join('\n')
}

/** The uses in `source` that KNOWN_NODE_IMPORTS does not excuse, and the known imports it no longer has. */
export function unexcusedUses(source: string, fileName: string): { uses: NodeUse[]; gone: string[] } {
  const all = nodeOnlyUses(source, fileName)
  const known = (use: NodeUse) =>
    use.kind !== 'global' && KNOWN_NODE_IMPORTS.has(use.name.replace(/^node:/, ''))
  return {
    uses: all.filter((use) => !known(use)),
    gone: [...KNOWN_NODE_IMPORTS.keys()].filter(
      (name) => !all.some((use) => known(use) && use.name.replace(/^node:/, '') === name),
    ),
  }
}
