/**
 * The cost model: an operation's estimate before execution (fields × list multipliers, with the depth guard). Its
 * actual cost after (actual.ts) counts the same thing in the response, one field one unit and one unit per
 * element of a list of scalars, so that a response as large as the estimate settles to the estimate.
 */
import {
  type DocumentNode,
  type FieldNode,
  type FragmentDefinitionNode,
  type GraphQLField,
  type GraphQLOutputType,
  type GraphQLSchema,
  getArgumentValues,
  getNamedType,
  getNullableType,
  getVariableValues,
  isInterfaceType,
  isListType,
  isObjectType,
  Kind,
  type OperationDefinitionNode,
  type SelectionSetNode,
} from 'graphql'

/** How the default estimate reads an operation. */
export interface CostModelOptions {
  /**
   * The deepest nesting of fields an operation may have (its root fields are at depth 1); a deeper one is refused
   * before any store call (`MAX_DEPTH_EXCEEDED`). Introspection (`__schema`, `__type`) is bounded by graphql-js's
   * own `MaxIntrospectionDepthRule` instead, and in breadth by `maxIntrospection`. @default 10
   */
  maxDepth?: number
  /** The multiplier of a list field that has none of the `slicingArguments`. @default 10 */
  listSize?: number
  /**
   * Arguments whose value is the size of a list field (the first one given wins), e.g. `books(first: 5)`. On a
   * field that is not a list (a Relay connection), it sizes the lists directly below it that have none of their
   * own (`edges`, `nodes`): `books(first: 5) { edges { node { title } } }`. @default ['first', 'last', 'limit']
   */
  slicingArguments?: readonly string[]
  /**
   * The most introspection fields an operation may run: `__schema` (an answer as large as the schema) and `__type`
   * (one type's), aliases included, each counted as often as it runs (below a list, once per element the estimate
   * gives it). More is refused before any store call (`MAX_INTROSPECTION_EXCEEDED`); `{ schema: 0, type: 0 }`
   * refuses introspection. @default { schema: 1, type: 10 }
   */
  maxIntrospection?: IntrospectionBound
}

/** How many `__schema` and `__type` fields one operation may run (`maxIntrospection`). */
export interface IntrospectionBound {
  /** `__schema` fields. @default 1 */
  schema?: number
  /** `__type` fields. @default 10 */
  type?: number
}

/** `CostModelOptions`' defaults, in one place (the `@default` tags above say the same). */
export const COST_MODEL_DEFAULTS = {
  maxDepth: 10,
  listSize: 10,
  slicingArguments: ['first', 'last', 'limit'],
  maxIntrospection: { schema: 1, type: 10 },
} as const satisfies CostModelOptions

/** What the estimate reads of an operation. */
export interface CostedOperation {
  schema: GraphQLSchema
  document: DocumentNode
  /** The operation that runs (of `document`). */
  operation: OperationDefinitionNode
  /**
   * The operation's variables as the request sent them (a slicing argument given as a variable is read from them,
   * coerced as execution coerces them: a variable's default fills in for one not sent).
   */
  variables: Readonly<Record<string, unknown>> | undefined
}

/** The estimate of an operation, and how deep its fields nest. */
export interface CostEstimate {
  cost: number
  /** The deepest nesting of fields (root fields: 1), introspection left out. */
  depth: number
}

/** Fields of the introspection system: charged 1 each, not descended (see `maxDepth`), counted (`maxIntrospection`). */
export const INTROSPECTION: ReadonlySet<string> = new Set(['__schema', '__type'])

/** Sums that stop at the largest safe integer: a hostile list size never makes `Infinity` or `NaN`. */
export const add = (a: number, b: number) => Math.min(Number.MAX_SAFE_INTEGER, a + b)
const times = (a: number, b: number) => (a === 0 || b === 0 ? 0 : Math.min(Number.MAX_SAFE_INTEGER, a * b))

/**
 * The default estimate: each field selected costs 1, and each element a list field may hold costs what it
 * selects, or 1 for a scalar (its size: its slicing argument as execution reads it, the argument's default
 * included, else `listSize`; a list of lists multiplies by `listSize` per inner list):
 *
 *   cost(selection) = Σ over its fields f: 1 + size(f) × each(f)
 *   each(f)         = cost(selection of f); for a scalar, 1 in a list and 0 alone
 *
 * A slicing argument on a field that is not a list (a Relay connection) sizes the lists directly below it that
 * have none of their own (`edges`, `nodes`). Fragments count where they are spread (each named fragment is read
 * once per size handed to it, whatever its uses); `@skip` and `@include` are not read (the estimate counts the
 * field). Throws `DepthExceeded` past `maxDepth`, `IntrospectionExceeded` past `maxIntrospection`.
 * @example
 * // { books(first: 5) { title author { name } } }  →  1 + 5 × (1 + 1 + 1 × 1) = 16
 * // { ids(first: 500) }                             →  1 + 500 × 1 = 501
 * // { books(first: 5) { edges { node { title } } } } →  1 + (1 + 5 × (1 + 1 × 1)) = 12
 */
export function estimateCost(operation: CostedOperation, options: CostModelOptions = {}): CostEstimate {
  return new Estimator(operation, options).operation()
}

/** An operation nests its fields deeper than `maxDepth`. */
export class DepthExceeded extends Error {
  override readonly name = 'DepthExceeded'
  constructor(
    readonly depth: number,
    readonly maxDepth: number,
  ) {
    super(`The operation nests fields ${depth} deep; at most ${maxDepth} are allowed.`)
  }
}

/** An operation runs more `__schema` or `__type` fields than `maxIntrospection` allows. */
export class IntrospectionExceeded extends Error {
  override readonly name = 'IntrospectionExceeded'
  constructor(
    readonly field: '__schema' | '__type',
    readonly count: number,
    readonly max: number,
  ) {
    super(
      `The operation runs \`${field}\` ${count} times; at most ${max} ${max === 1 ? 'is' : 'are'} allowed.`,
    )
  }
}

interface Part {
  cost: number
  /** Nesting below the selection set, 0 for none. */
  depth: number
  /** How many times `__schema` fields run in it. */
  schemas: number
  /** How many times `__type` fields run in it. */
  types: number
}

/** A size handed down by a field that is not a list to the lists directly below it (none: `undefined`). */
type Handed = number | undefined

/** One estimate: named fragments are read once each (memoised), so a fragment spread many times costs one read. */
class Estimator {
  readonly #op: CostedOperation
  readonly #maxDepth: number
  readonly #listSize: number
  readonly #slicing: readonly string[]
  readonly #maxIntrospection: Required<IntrospectionBound>
  readonly #fragments = new Map<string, FragmentDefinitionNode>()
  /** Each fragment's part, by its name and the size handed to it. */
  readonly #fragmentParts = new Map<string, Part>()
  /** Fragments being read: a cycle (a document graphql-js would refuse) reads as too deep. */
  readonly #reading = new Set<string>()
  /** The variables as `getArgumentValues` takes them, once a slicing argument needs them (null: they do not coerce). */
  #variables: unknown

  constructor(op: CostedOperation, options: CostModelOptions) {
    this.#op = op
    this.#maxDepth = options.maxDepth ?? COST_MODEL_DEFAULTS.maxDepth
    this.#listSize = options.listSize ?? COST_MODEL_DEFAULTS.listSize
    this.#slicing = options.slicingArguments ?? COST_MODEL_DEFAULTS.slicingArguments
    this.#maxIntrospection = { ...COST_MODEL_DEFAULTS.maxIntrospection, ...options.maxIntrospection }
    for (const definition of op.document.definitions)
      if (definition.kind === Kind.FRAGMENT_DEFINITION) this.#fragments.set(definition.name.value, definition)
  }

  operation(): CostEstimate {
    const part = this.#selection(this.#op.operation.selectionSet, rootOf(this.#op), 0, undefined)
    const { schema, type } = this.#maxIntrospection
    if (part.schemas > schema) throw new IntrospectionExceeded('__schema', part.schemas, schema)
    if (part.types > type) throw new IntrospectionExceeded('__type', part.types, type)
    return { cost: part.cost, depth: part.depth }
  }

  /**
   * The cost of a selection set of `type` (undefined: unknown, its fields counted without lists) at `depth`;
   * `handed`: the size its list fields take when they have no slicing argument of their own.
   */
  #selection(set: SelectionSetNode, type: FieldOwner | undefined, depth: number, handed: Handed): Part {
    const total: Part = { cost: 0, depth: 0, schemas: 0, types: 0 }
    for (const selection of set.selections) {
      let part: Part
      if (selection.kind === Kind.FIELD) part = this.#field(selection, type, depth, handed)
      else if (selection.kind === Kind.INLINE_FRAGMENT) {
        const condition = selection.typeCondition?.name.value
        part = this.#selection(
          selection.selectionSet,
          condition ? this.#type(condition) : type,
          depth,
          handed,
        )
      } else part = this.#fragment(selection.name.value, depth, handed)
      total.cost = add(total.cost, part.cost)
      total.depth = Math.max(total.depth, part.depth)
      total.schemas = add(total.schemas, part.schemas)
      total.types = add(total.types, part.types)
    }
    return total
  }

  #field(node: FieldNode, owner: FieldOwner | undefined, depth: number, handed: Handed): Part {
    if (depth + 1 > this.#maxDepth) throw new DepthExceeded(depth + 1, this.#maxDepth)
    const name = node.name.value
    if (INTROSPECTION.has(name))
      return { cost: 1, depth: 1, schemas: name === '__schema' ? 1 : 0, types: name === '__type' ? 1 : 0 }
    const field = owner?.getFields()[name]
    const list = field !== undefined && isListType(getNullableType(field.type))
    if (node.selectionSet === undefined)
      return { cost: list ? add(1, this.#size(node, field, handed)) : 1, depth: 1, schemas: 0, types: 0 }
    // A field that is not a list hands its slicing argument to the lists below it (a Relay connection's edges).
    const handing = field !== undefined && !list ? this.#sliced(node, field) : undefined
    const below = this.#selection(node.selectionSet, ownerOf(field?.type), depth + 1, handing)
    const size = this.#size(node, field, handed)
    return {
      cost: add(1, times(size, below.cost)),
      depth: below.depth + 1,
      schemas: times(size, below.schemas),
      types: times(size, below.types),
    }
  }

  /**
   * A named fragment's part, read once per size handed to it: its depth is relative, so it is checked where it is
   * spread.
   */
  #fragment(name: string, depth: number, handed: Handed): Part {
    const memo = handed === undefined ? name : `${name}\u0000${handed}`
    let part = this.#fragmentParts.get(memo)
    if (part === undefined) {
      const fragment = this.#fragments.get(name)
      if (fragment === undefined) return { cost: 0, depth: 0, schemas: 0, types: 0 }
      if (this.#reading.has(name)) throw new DepthExceeded(Number.POSITIVE_INFINITY, this.#maxDepth)
      this.#reading.add(name)
      part = this.#selection(fragment.selectionSet, this.#type(fragment.typeCondition.name.value), 0, handed)
      this.#reading.delete(name)
      this.#fragmentParts.set(memo, part)
    }
    if (depth + part.depth > this.#maxDepth) throw new DepthExceeded(depth + part.depth, this.#maxDepth)
    return part
  }

  /**
   * How many elements a field's value may hold: 1 for a single value, the product of its list sizes (the outer
   * one: its slicing argument, else the size `handed` down to it, else `listSize`).
   */
  #size(node: FieldNode, field: GraphQLField<unknown, unknown> | undefined, handed: Handed): number {
    let type: GraphQLOutputType | undefined = field === undefined ? undefined : getNullableType(field.type)
    let size = 1
    let outer = true
    while (type !== undefined && isListType(type)) {
      const each =
        outer && field !== undefined
          ? (this.#sliced(node, field) ?? handed ?? this.#listSize)
          : this.#listSize
      size = times(size, each)
      outer = false
      type = getNullableType(type.ofType) as GraphQLOutputType
    }
    return size
  }

  /**
   * The first slicing argument that has a value, as a whole number ≥ 0; else undefined. Read as execution reads
   * it: a literal, a variable (its default when the request sent none), or the argument's default in the schema.
   */
  #sliced(node: FieldNode, field: GraphQLField<unknown, unknown>): number | undefined {
    const values = this.#argumentValues(node, field)
    for (const name of this.#slicing) {
      const given = values === undefined ? this.#written(node, name) : values[name]
      if (typeof given === 'number' && Number.isInteger(given) && given >= 0)
        return Math.min(given, Number.MAX_SAFE_INTEGER)
    }
    return undefined
  }

  /** The field's arguments as graphql coerces them for execution; undefined where they do not coerce. */
  #argumentValues(
    node: FieldNode,
    field: GraphQLField<unknown, unknown>,
  ): Record<string, unknown> | undefined {
    if (this.#variables === undefined) this.#variables = coercedVariables(this.#op)
    if (this.#variables === null) return undefined
    try {
      // NOTE: the variables in the form of the graphql installed: its values (16) or `{ sources, coerced }` (17).
      return getArgumentValues(field, node, this.#variables as Record<string, unknown>)
    } catch {
      return undefined // a value execution refuses too: the field errors without a list
    }
  }

  /** An argument as written: a literal, or a variable's value as sent. */
  #written(node: FieldNode, name: string): unknown {
    const value = node.arguments?.find((each) => each.name.value === name)?.value
    if (value?.kind === Kind.INT) return Number(value.value)
    return value?.kind === Kind.VARIABLE ? this.#op.variables?.[value.name.value] : undefined
  }

  #type(name: string): FieldOwner | undefined {
    return ownerNamed(this.#op.schema, name)
  }
}

/**
 * The variables as execution coerces them (defaults filled in, input objects coerced), in the form the installed
 * graphql's `getArgumentValues` takes; null when they do not coerce (execution refuses them too).
 */
function coercedVariables({ schema, operation, variables }: CostedOperation): unknown {
  try {
    const answer: object = getVariableValues(schema, operation.variableDefinitions ?? [], variables ?? {}, {
      maxErrors: 1,
    })
    if ('coerced' in answer) return answer.coerced // graphql 16
    if ('variableValues' in answer) return answer.variableValues // graphql 17: { sources, coerced }
    return null
  } catch {
    return null
  }
}

/** A type with fields (object or interface); unions have none of their own. */
export type FieldOwner = { getFields(): Record<string, GraphQLField<unknown, unknown>> }

/** The type with fields that a field of `type` holds (lists and non-null unwrapped), if any. */
export function ownerOf(type: GraphQLOutputType | undefined): FieldOwner | undefined {
  if (type === undefined) return undefined
  const named = getNamedType(type)
  return isObjectType(named) || isInterfaceType(named) ? named : undefined
}

/** The object or interface type of the schema named `name`, if any. */
export function ownerNamed(schema: GraphQLSchema, name: string): FieldOwner | undefined {
  const type = schema.getType(name)
  return type !== undefined && (isObjectType(type) || isInterfaceType(type)) ? type : undefined
}

/** The root type of the operation (query, mutation, subscription). */
export function rootOf({ schema, operation }: CostedOperation): FieldOwner | undefined {
  const root =
    operation.operation === 'query'
      ? schema.getQueryType()
      : operation.operation === 'mutation'
        ? schema.getMutationType()
        : schema.getSubscriptionType()
  return root ?? undefined
}
