/**
 * The cost model (estimate.ts, actual.ts) and the options (options.ts), without a server: the formula on worked
 * examples, fragments read once, the depth guard, the actual cost of a result and of a streamed one, and the
 * checks at construction.
 */
import { buildSchema, getOperationAST, parse } from 'graphql'
import { describe, expect, it } from 'vitest'
import { StreamTally } from '../src/actual.js'
import { useRateLimit } from '../src/envelop.js'
import {
  COST_MODEL_DEFAULTS,
  type CostedOperation,
  countResultFields,
  DepthExceeded,
  estimateCost,
  IntrospectionExceeded,
} from '../src/index.js'

const schema = buildSchema(/* GraphQL */ `
  type Query {
    hello: String
    books(first: Int, limit: Int): [Book!]!
    catalog(first: Int = 6, filter: Filter): [Book]
    ids(first: Int): [Int!]!
    matrix: [[Int]]
    grid: [[Cell]]
    search(text: String): [Result!]!
    connection(first: Int): Connection
  }
  type Connection {
    edges: [Edge]
    nodes: [Book]
    total: Int
  }
  type Edge {
    node: Book
  }
  type Book {
    title: String
    author: Author
  }
  type Author {
    name: String
    books(first: Int): [Book]
  }
  type Cell {
    value: Int
  }
  union Result = Book | Author
  input Filter {
    author: String
    year: Int = 2000
  }
`)

function operationOf(source: string, variables?: Record<string, unknown>): CostedOperation {
  const document = parse(source)
  return { schema, document, operation: getOperationAST(document)!, variables }
}

function estimate(source: string, variables?: Record<string, unknown>, options = {}) {
  return estimateCost(operationOf(source, variables), options)
}

describe('estimateCost: fields × list multipliers', () => {
  it('counts each field once, and the fields below a list once per element', () => {
    expect(estimate('{ hello }')).toEqual({ cost: 1, depth: 1 })
    // 1 + 5 × (title + author + 1 × name) = 16, as the README shows
    expect(estimate('{ books(first: 5) { title author { name } } }')).toEqual({ cost: 16, depth: 3 })
    // no slicing argument: listSize (10)
    expect(estimate('{ books { title } }').cost).toBe(1 + 10 * 1)
    expect(estimate('{ books { title } }', undefined, { listSize: 2 }).cost).toBe(1 + 2)
    // lists in lists multiply: 1 + 5 × (title + author + 1 × (books + 3 × title))
    expect(estimate('{ books(first: 5) { title author { books(first: 3) { title } } } }').cost).toBe(31)
  })

  it('reads the slicing argument from a literal or a variable; the first given wins; others fall back', () => {
    expect(estimate('query ($n: Int) { books(first: $n) { title } }', { n: 7 }).cost).toBe(8)
    expect(estimate('{ books(limit: 4) { title } }').cost).toBe(5)
    expect(estimate('{ books(first: 2, limit: 4) { title } }').cost).toBe(3)
    expect(estimate('query ($n: Int) { books(first: $n) { title } }', {}).cost).toBe(11)
    expect(estimate('{ books(limit: 4) { title } }', undefined, { slicingArguments: ['first'] }).cost).toBe(
      11,
    )
  })

  it('reads the size as execution does: a variable default, the argument default of the schema, input objects', () => {
    expect(estimate('query ($n: Int = 7) { books(first: $n) { title } }').cost).toBe(8)
    expect(estimate('query ($n: Int = 7) { books(first: $n) { title } }', { n: 2 }).cost).toBe(3)
    expect(estimate('{ catalog { title } }').cost).toBe(7) // catalog(first: Int = 6)
    expect(estimate('query ($f: Filter = { author: "x" }) { catalog(filter: $f) { title } }').cost).toBe(7)
    // a size that cannot be read (null, a variable that does not coerce) is priced at listSize
    expect(estimate('query ($n: Int) { books(first: $n) { title } }', { n: null }).cost).toBe(11)
    expect(estimate('query ($n: Int) { books(first: $n) { title } }', { n: 'many' }).cost).toBe(11)
  })

  it('a list of scalars costs its size like any list; a list of lists multiplies by listSize per inner list', () => {
    expect(estimate('{ ids(first: 7) }').cost).toBe(1 + 7)
    expect(estimate('{ ids }').cost).toBe(1 + 10)
    expect(estimate('{ matrix }').cost).toBe(1 + 10 * 10)
    expect(estimate('{ grid { value } }').cost).toBe(1 + 10 * 10)
  })

  it('counts fragments where they are spread, inline fragments of a union by their own type', () => {
    const source = `{ search { ... on Book { title } ... on Author { name books(first: 2) { ...T } } } }
      fragment T on Book { title author { name } }`
    // 1 + 10 × (title + name + (1 + 2 × (title + author + name)))
    expect(estimate(source).cost).toBe(1 + 10 * (1 + 1 + 1 + 2 * 3))
  })

  it('a slicing argument on a field that is not a list (a Relay connection) sizes the lists directly below it', () => {
    // 1 + (1 + 5 × (node + 1 × title))
    expect(estimate('{ connection(first: 5) { edges { node { title } } } }').cost).toBe(12)
    expect(estimate('{ connection(first: 5) { edges { node { title } } nodes { title } total } }').cost).toBe(
      1 + (1 + 5 * 2) + (1 + 5 * 1) + 1,
    )
    expect(estimate('{ connection { edges { node { title } } } }').cost).toBe(1 + (1 + 10 * 2))
    // a fragment is read once per size handed to it
    const spread = `{ a: connection(first: 5) { ...C } b: connection(first: 2) { ...C } }
      fragment C on Connection { edges { node { title } } }`
    expect(estimate(spread).cost).toBe(12 + (1 + (1 + 2 * 2)))
  })

  it('stops at the largest safe integer: a hostile size never makes Infinity or NaN', () => {
    const fragments = Array.from({ length: 80 }, (_, i) =>
      i === 0 ? 'fragment F0 on Book { title }' : `fragment F${i} on Book { ...F${i - 1} ...F${i - 1} }`,
    )
    expect(estimate(`{ books(first: 1) { ...F79 } } ${fragments.join(' ')}`).cost).toBe(
      Number.MAX_SAFE_INTEGER,
    )
    expect(
      estimate('{ books(first: 9007199254740991) { author { books(first: 99999) { title } } } }').cost,
    ).toBe(Number.MAX_SAFE_INTEGER)
  })
})

describe('estimateCost: the depth guard', () => {
  it(`refuses fields nested deeper than maxDepth (${COST_MODEL_DEFAULTS.maxDepth} by default), through fragments too`, () => {
    const nested = (levels: number) => `{ ${'books { author { '.repeat(levels)}name${' } }'.repeat(levels)} }`
    expect(estimate(nested(4)).depth).toBe(9)
    expect(() => estimate(nested(5))).toThrow(DepthExceeded) // 11 deep
    expect(() => estimate(nested(2), undefined, { maxDepth: 4 })).toThrow('nests fields 5 deep; at most 4')
    const viaFragment = `{ books { ...A } } fragment A on Book { author { books { author { name } } } }`
    expect(estimate(viaFragment).depth).toBe(5)
    expect(() => estimate(viaFragment, undefined, { maxDepth: 4 })).toThrow(DepthExceeded)
  })

  it('reads a cycle of fragments (which graphql-js validation refuses) as too deep, without looping', () => {
    const cycle = '{ books { ...A } } fragment A on Book { author { books { ...A } } }'
    expect(() => estimate(cycle)).toThrow(DepthExceeded)
  })

  it('leaves introspection to graphql-js: __schema and __type count 1 each, undescended', () => {
    expect(
      estimate('{ __schema { types { fields { type { ofType { ofType { ofType { name } } } } } } } }'),
    ).toEqual({
      cost: 1,
      depth: 1,
    })
  })
})

describe('estimateCost: the introspection bound (maxIntrospection)', () => {
  it('counts __schema and __type under their aliases, and refuses more than the bound', () => {
    const schemas = '{ a: __schema { queryType { name } } b: __schema { queryType { name } } }'
    expect(() => estimate(schemas)).toThrow(IntrospectionExceeded)
    expect(() => estimate(schemas)).toThrow('The operation runs `__schema` 2 times; at most 1 is allowed.')
    expect(estimate(schemas, undefined, { maxIntrospection: { schema: 2 } }).cost).toBe(2)
    const types = `{ ${Array.from({ length: 11 }, (_, i) => `t${i}: __type(name: "Book") { name }`).join(' ')} }`
    expect(() => estimate(types)).toThrow('The operation runs `__type` 11 times; at most 10 are allowed.')
    expect(() =>
      estimate('{ __type(name: "Book") { name } }', undefined, { maxIntrospection: { type: 0 } }),
    ).toThrow(IntrospectionExceeded)
    expect(COST_MODEL_DEFAULTS.maxIntrospection).toEqual({ schema: 1, type: 10 })
  })
})

describe('countResultFields: the actual cost, read by the operation', () => {
  const count = (source: string, data: unknown) => countResultFields(data, operationOf(source))

  it('counts the fields of the response, those of list elements once per element, nothing below a null', () => {
    const data = {
      books: [
        { title: 'a', author: { name: 'x' } },
        { title: 'b', author: null },
      ],
    }
    expect(count('{ books { title author { name } } }', data)).toBe(1 + (1 + 1 + 1) + (1 + 1))
    expect(count('{ books { title } }', null)).toBe(0)
    expect(count('{ __schema { types { name } } }', { __schema: { types: [{ name: 'Query' }] } })).toBe(1)
  })

  it('costs a field by its name, whatever its alias: an alias named __schema is the list it stands for', () => {
    const data = { __schema: [{ title: 'a' }, { title: 'b' }], __type: [1, 2, 3] }
    expect(count('{ __schema: books { title } __type: ids }', data)).toBe(1 + 2 + (1 + 3))
  })

  it('counts each response key once, fields merged under it as execution merges them', () => {
    const source = '{ books { title } ...More } fragment More on Query { books { author { name } } }'
    const data = { books: [{ title: 'a', author: { name: 'x' } }] }
    expect(count(source, data)).toBe(1 + (1 + 1 + 1))
    const search = '{ search { ... on Book { title } ... on Author { name books(first: 1) { title } } } }'
    const results = { search: [{ title: 'a' }, { name: 'x', books: [{ title: 'b' }] }] }
    expect(count(search, results)).toBe(1 + 1 + (1 + 1 + 1))
  })

  it('counts each element of a list of scalars, and of lists of lists', () => {
    expect(count('{ ids }', { ids: [1, 2, 3] })).toBe(1 + 3)
    expect(count('{ matrix }', { matrix: [[1, 2], null, [3]] })).toBe(1 + 3)
    expect(count('{ grid { value } }', { grid: [[{ value: 1 }, null], [{ value: 2 }]] })).toBe(1 + 2)
  })

  it('settles to the estimate when the response is as large as it', () => {
    const source = '{ books(first: 5) { title author { name } } ids(first: 4) }'
    const data = {
      books: Array.from({ length: 5 }, (_, i) => ({ title: `${i}`, author: { name: `${i}` } })),
      ids: [1, 2, 3, 4],
    }
    expect(count(source, data)).toBe(estimate(source).cost)
  })
})

describe('StreamTally: the incremental parts of a streamed result', () => {
  const source = '{ hello books(first: 2) @stream { title } ... @defer { ids } }'

  it('counts the parts graphql-tools and graphql 17 alphas send (a path on each part)', () => {
    const tally = new StreamTally(operationOf(source))
    tally.add({ data: { hello: 'hi', books: [] }, hasNext: true })
    tally.add({ incremental: [{ items: [{ title: 'a' }], path: ['books', 0] }], hasNext: true })
    tally.add({ incremental: [{ items: [{ title: 'b' }], path: ['books', 1] }], hasNext: true })
    tally.add({ incremental: [{ data: { ids: [1, 2, 3] }, path: [] }], hasNext: false })
    expect(tally.outcome()).toEqual({ data: { hello: 'hi', books: [] }, incrementalCost: 2 + 4 })
  })

  it('counts the parts graphql 17 sends (a pending id for each path, a subPath below it)', () => {
    const tally = new StreamTally(operationOf(source))
    tally.add({ data: { hello: 'hi', books: [] }, pending: [{ id: '0', path: ['books'] }], hasNext: true })
    tally.add({
      pending: [{ id: '1', path: [] }],
      incremental: [{ id: '0', items: [{ title: 'a' }] }],
      hasNext: true,
    })
    tally.add({
      incremental: [
        { id: '0', items: [{ title: 'b' }, { title: 'c' }] },
        { id: '1', data: { ids: [1, 2] } },
      ],
      completed: [{ id: '0' }, { id: '1' }],
      hasNext: false,
    })
    expect(tally.outcome().incrementalCost).toBe(3 + 3)
    const nested = new StreamTally(operationOf('{ books(first: 1) { ... @defer { author { name } } } }'))
    nested.add({ data: { books: [{}] }, pending: [{ id: '0', path: ['books', 0] }], hasNext: true })
    nested.add({ incremental: [{ id: '0', subPath: ['author'], data: { name: 'x' } }], hasNext: false })
    expect(nested.outcome().incrementalCost).toBe(1)
  })
})

describe('options, checked at construction', () => {
  it('refuses unknown names, naming the HTTP-only ones that do not apply', () => {
    expect(() => useRateLimit({ delay: {} } as never)).toThrow(
      expect.objectContaining({ code: 'ERR_RATEWINDOW_UNKNOWN_OPTION' }),
    )
    expect(() => useRateLimit({ max: 10 } as never)).toThrow(/`limit: 100`/)
  })

  it('refuses bad cost model values, naming the option', () => {
    expect(() => useRateLimit({ maxDepth: 0 })).toThrow('`maxDepth` must be a whole number >= 1')
    expect(() => useRateLimit({ listSize: -1 })).toThrow('`listSize` must be a whole number >= 0')
    expect(() => useRateLimit({ slicingArguments: [''] })).toThrow(
      '`slicingArguments` must be argument names',
    )
    expect(() => useRateLimit({ actualCost: 3 as never })).toThrow('`actualCost` must be a function')
    expect(() => useRateLimit({ maxIntrospection: { schema: -1 } })).toThrow(
      '`maxIntrospection.schema` must be a whole number >= 0',
    )
    expect(() => useRateLimit({ maxIntrospection: { schemas: 1 } } as never)).toThrow(
      expect.objectContaining({ code: 'ERR_RATEWINDOW_UNKNOWN_OPTION' }),
    )
    expect(() => useRateLimit({ concurrency: { limit: 2, releaseOnClose: true } } as never)).toThrow(
      expect.objectContaining({
        code: 'ERR_RATEWINDOW_INVALID_OPTION',
        option: 'concurrency.releaseOnClose',
      }),
    )
    expect(() => useRateLimit({ concurrency: { limit: 0 } })).toThrow(/concurrency|limit/)
    expect(() => useRateLimit({ cost: 5, limit: 3 })).toThrow(
      expect.objectContaining({ code: 'ERR_RATEWINDOW_COST_EXCEEDS_LIMIT' }),
    )
  })
})
