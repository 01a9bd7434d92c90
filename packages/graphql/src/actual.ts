/**
 * The actual cost: the response read by the operation that made it. A response key is only a name the client
 * chose (an alias can call `books` `__schema`), so each key is looked up among the operation's fields and costed
 * as the field it stands for, the way the estimate costs it. A streamed result (`@defer`, `@stream`) is read part
 * by part: each part names the place it fills by its path.
 */
import {
  type FieldNode,
  type FragmentDefinitionNode,
  type GraphQLOutputType,
  getNullableType,
  isListType,
  Kind,
  type SelectionSetNode,
} from 'graphql'
import {
  add,
  type CostedOperation,
  type FieldOwner,
  INTROSPECTION,
  ownerNamed,
  ownerOf,
  rootOf,
} from './estimate.js'
import type { ExecutionOutcome } from './options.js'

/**
 * The actual cost of a response's `data`, read by the operation that made it: each field the operation selected
 * and the response holds costs 1, whatever its alias; the fields below a list count once per element, and each
 * element of a list of scalars costs 1; introspection fields (`__schema`, `__type`, by their names) count 1 each;
 * a null costs nothing below it. A response exactly as large as the estimate settles to the estimate.
 * @example
 * // { a: books(first: 2) { title } } answered { a: [{ title: 'x' }, { title: 'y' }] }  →  1 + 2 × 1 = 3
 * countResultFields(result.data, operation)
 */
export function countResultFields(data: unknown, operation: CostedOperation): number {
  if (typeof operation?.document !== 'object')
    throw new TypeError(
      'countResultFields(data, operation): pass the operation (`actualCost` receives it second): the response alone cannot say which field each key stands for, as an alias can rename any.',
    )
  return new ResultReader(operation).object(data)
}

/** The fields an operation merges under one response key of a selection, and what they select below. */
interface Entry {
  /** The field's name (not its alias): every field merged under a key has it, or one of the same shape. */
  name: string
  /** Its type, where the schema knows it; else the value's shape decides. */
  type: GraphQLOutputType | undefined
  /** A scalar or an enum (no selection set). */
  leaf: boolean
  /** The selection sets merged under the key, each with the type that owns its fields. */
  below: { set: SelectionSetNode; owner: FieldOwner | undefined }[]
  children?: Map<string, Entry>
}

/** A path of the response, as incremental parts give it: response keys and list indexes. */
export type ResponsePath = readonly (string | number)[]

/**
 * Reads responses of one operation: the selection under each response key is merged once (as execution merges
 * it) and kept for every element that has it, so a list of a hundred thousand elements is read at one lookup per
 * field of each.
 */
export class ResultReader {
  readonly #op: CostedOperation
  readonly #fragments = new Map<string, FragmentDefinitionNode>()
  readonly #root: Map<string, Entry>

  constructor(op: CostedOperation) {
    this.#op = op
    for (const definition of op.document.definitions)
      if (definition.kind === Kind.FRAGMENT_DEFINITION) this.#fragments.set(definition.name.value, definition)
    this.#root = this.#collect([{ set: op.operation.selectionSet, owner: rootOf(op) }])
  }

  /** The cost of an object that the selection at `path` (the root by default) fills: its fields'. */
  object(value: unknown, path: ResponsePath = []): number {
    const fields = this.#at(path)?.fields
    return fields === undefined ? 0 : this.#object(value, fields)
  }

  /** The cost of streamed `items`: elements of the list at `path`, each as an element of that list costs. */
  items(items: readonly unknown[], path: ResponsePath): number {
    const entry = this.#at(path)?.entry
    if (entry === undefined) return 0
    const element = listOf(entry.type, items) || undefined
    let total = 0
    for (const item of items) total = add(total, this.#element(entry, item, element))
    return total
  }

  /** The entry at a path and the fields below it; list indexes are stepped over. */
  #at(path: ResponsePath): { entry: Entry | undefined; fields: Map<string, Entry> } | undefined {
    let fields = this.#root
    let entry: Entry | undefined
    for (const step of path) {
      if (typeof step !== 'string') continue
      entry = fields.get(step)
      if (entry === undefined) return undefined
      fields = this.#children(entry)
    }
    return { entry, fields }
  }

  #object(value: unknown, fields: Map<string, Entry>): number {
    if (value === null || typeof value !== 'object' || Array.isArray(value)) return 0
    let total = 0
    for (const [key, entry] of fields)
      if (Object.hasOwn(value, key))
        total = add(total, this.#field(entry, (value as Record<string, unknown>)[key]))
    return total
  }

  #field(entry: Entry, value: unknown): number {
    if (INTROSPECTION.has(entry.name)) return 1
    return add(1, this.#value(entry, value, entry.type))
  }

  /** What a field's value costs below the field itself. */
  #value(entry: Entry, value: unknown, type: GraphQLOutputType | undefined): number {
    if (value === null || value === undefined) return 0
    const list = listOf(type, value)
    if (list === false) return entry.leaf ? 0 : this.#object(value, this.#children(entry))
    if (!Array.isArray(value)) return 0
    let total = 0
    for (const item of value) total = add(total, this.#element(entry, item, list))
    return total
  }

  /** One element of a list: a scalar costs 1, an object its fields, an inner list its elements. */
  #element(entry: Entry, value: unknown, type: GraphQLOutputType | undefined): number {
    if (value === null || value === undefined) return 0
    if (listOf(type, value) !== false) return this.#value(entry, value, type)
    return entry.leaf ? 1 : this.#object(value, this.#children(entry))
  }

  #children(entry: Entry): Map<string, Entry> {
    entry.children ??= this.#collect(entry.below)
    return entry.children
  }

  /**
   * The fields of selection sets by response key, through every fragment (each type condition is taken: keys the
   * response lacks cost nothing, and validation gives fields merged under one key the same shape).
   */
  #collect(sets: Entry['below']): Map<string, Entry> {
    const fields = new Map<string, Entry>()
    const spread = new Set<string>()
    const visit = (set: SelectionSetNode, owner: FieldOwner | undefined): void => {
      for (const selection of set.selections) {
        if (selection.kind === Kind.FIELD) this.#merge(fields, selection, owner)
        else if (selection.kind === Kind.INLINE_FRAGMENT) {
          const condition = selection.typeCondition?.name.value
          visit(selection.selectionSet, condition === undefined ? owner : this.#owner(owner, condition))
        } else {
          const name = selection.name.value
          const fragment = this.#fragments.get(name)
          if (fragment === undefined || spread.has(name)) continue
          spread.add(name)
          visit(fragment.selectionSet, this.#owner(owner, fragment.typeCondition.name.value))
        }
      }
    }
    for (const { set, owner } of sets) visit(set, owner)
    return fields
  }

  #merge(fields: Map<string, Entry>, node: FieldNode, owner: FieldOwner | undefined): void {
    const key = node.alias?.value ?? node.name.value
    let entry = fields.get(key)
    if (entry === undefined) {
      entry = { name: node.name.value, type: undefined, leaf: node.selectionSet === undefined, below: [] }
      fields.set(key, entry)
    }
    entry.type ??= owner?.getFields()[node.name.value]?.type
    if (node.selectionSet !== undefined)
      entry.below.push({ set: node.selectionSet, owner: ownerOf(owner?.getFields()[node.name.value]?.type) })
  }

  #owner(current: FieldOwner | undefined, typeName: string): FieldOwner | undefined {
    return ownerNamed(this.#op.schema, typeName) ?? current
  }
}

/**
 * Whether a value of `type` is a list: false if not; else the type of its elements (undefined where the schema
 * does not say, and the value's shape decides).
 */
function listOf(type: GraphQLOutputType | undefined, value: unknown): GraphQLOutputType | undefined | false {
  if (type === undefined) return Array.isArray(value) ? undefined : false
  const nullable = getNullableType(type)
  return isListType(nullable) ? (nullable.ofType as GraphQLOutputType) : false
}

/** One part of a streamed result, in any of the formats servers send (graphql-js 17, its alphas, graphql-tools). */
interface StreamedPart {
  data?: unknown
  errors?: readonly unknown[]
  pending?: readonly { id: string; path: ResponsePath }[]
  incremental?: readonly {
    id?: string
    path?: ResponsePath
    subPath?: ResponsePath
    data?: unknown
    items?: readonly unknown[]
  }[]
  completed?: readonly { id: string }[]
}

/**
 * Counts a streamed result part by part, as the parts pass: what each incremental part delivered, at the place
 * its path (or its pending id) names. The first part's `data` is left to the `actualCost` that settles.
 */
export class StreamTally {
  readonly #reader: ResultReader
  /** The paths of the parts announced and not completed (graphql 17 names a part by the id of its path). */
  readonly #pending = new Map<string, ResponsePath>()
  #first: ExecutionOutcome | undefined
  #incremental = 0

  constructor(operation: CostedOperation) {
    this.#reader = new ResultReader(operation)
  }

  add(part: unknown): void {
    if (part === null || typeof part !== 'object') return
    const { data, errors, pending, incremental, completed } = part as StreamedPart
    this.#first ??= { data, errors }
    for (const announced of pending ?? []) this.#pending.set(announced.id, announced.path)
    for (const piece of incremental ?? []) {
      const path =
        piece.id === undefined
          ? piece.path
          : [...(this.#pending.get(piece.id) ?? []), ...(piece.subPath ?? [])]
      if (path === undefined) continue
      const cost = Array.isArray(piece.items)
        ? this.#reader.items(piece.items, path)
        : this.#reader.object(piece.data, path)
      this.#incremental = add(this.#incremental, cost)
    }
    for (const done of completed ?? []) this.#pending.delete(done.id)
  }

  /** What the stream delivered so far, as `actualCost` takes it. */
  outcome(): ExecutionOutcome {
    return { ...this.#first, incrementalCost: this.#incremental }
  }
}
