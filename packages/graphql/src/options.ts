/**
 * The plugins' options: core's middleware options where they mean the same in GraphQL (rules, keys, lists, headers,
 * the store and its failure policy), the cost model's, and the few of GraphQL's own. Parsed once, at construction.
 */
import { type Awaitable, type HttpRateLimitOptions, RateLimitError } from '@ratewindow/core'
import { middlewareOptionNames, type SettledConcurrency, settledConcurrency } from '@ratewindow/core/adapter'
import { invalid, namesOf, rejectUnknownOptions, requireObject, wholeNumber } from '@ratewindow/core/support'
import type { DocumentNode, GraphQLSchema, OperationDefinitionNode } from 'graphql'
import {
  COST_MODEL_DEFAULTS,
  type CostEstimate,
  type CostedOperation,
  type CostModelOptions,
  type IntrospectionBound,
} from './estimate.js'

/** The request headers, where the transport is HTTP: a fetch `Headers` or Apollo's `HeaderMap` fits. */
export interface HeaderReader {
  get(name: string): string | null | undefined
}

/**
 * One GraphQL operation, as the options' functions (`key`, `skip`, `cost`, `rules`, `limit`, …) receive it: after
 * validation, before execution.
 */
// biome-ignore lint/suspicious/noExplicitAny: the server's context type, as the servers' own plugin types take it.
export interface GraphQLOperation<TContext = any> extends CostedOperation {
  /** The GraphQL context value (Yoga: with `request`; on Node, `req` too). */
  context: TContext
  schema: GraphQLSchema
  document: DocumentNode
  operation: OperationDefinitionNode
  /** The operation's name, if it has one: the `route` of observer events. */
  operationName: string | undefined
  /** The HTTP request's headers, when the operation came over HTTP. */
  headers: HeaderReader | undefined
  /** The default cost model's figures for this operation (its depth already checked against `maxDepth`). */
  estimate: CostEstimate
}

/**
 * What a plugin settles from: the result of one execution (`data` may be partial, or null); for a result streamed
 * in parts (`@defer`, `@stream`), its first part, and what the parts after it delivered.
 */
export interface ExecutionOutcome {
  data?: unknown
  errors?: readonly unknown[]
  /**
   * For a result streamed in parts, settled once the stream ends or is cancelled: what its incremental parts
   * delivered, counted as `countResultFields` counts (their fields, read by the operation). Absent otherwise.
   */
  incrementalCost?: number
}

/**
 * The `concurrency` option of the plugins: core's, but for `releaseOnClose` (an operation holds its slot until it
 * is settled, whatever its connection does).
 */
export type OperationConcurrency = SettledConcurrency

/** The plugins' defaults of their own (`COST_MODEL_DEFAULTS` holds the cost model's). */
export const GRAPHQL_DEFAULTS = {
  concurrency: { limit: 10, renew: true },
} as const satisfies { concurrency: OperationConcurrency }

/** The options of `useRateLimit()` and `rateLimitPlugin()`. */
// biome-ignore lint/suspicious/noExplicitAny: the server's context type.
export interface GraphQLRateLimitOptions<TContext = any>
  extends Omit<
      HttpRateLimitOptions<GraphQLOperation<TContext>>,
      | 'cost'
      | 'concurrency'
      | 'delay'
      | 'reservationHorizon'
      | 'overrides'
      | 'message'
      | 'problemDetails'
      | 'skipFailedRequests'
      | 'skipSuccessfulRequests'
      | 'requestWasSuccessful'
    >,
    CostModelOptions {
  /**
   * At most `limit` operations of a key in flight at once: an operation takes a slot once its cost is admitted
   * and gives it back once it is settled (a streamed one: when its stream ends or is cancelled; a subscription:
   * once it subscribed); one more is refused (`RATE_LIMITED`, `Retry-After: 1`) and its charge given back. Each
   * operation is admitted on its estimate before those in flight settle, so this bounds what underestimates run at
   * once: the work of a key stays within `limit` + `maxDebt` + this many underestimates (docs/graphql.md). On by
   * default with a store that has leases (MemoryStore, RedisStore, DurableObjectStore; no bound with one without,
   * such as SyncedStore); `false` turns it off. A batch of more operations than this runs the rest refused.
   * @default { limit: 10 }, with a store that has leases
   */
  concurrency?: OperationConcurrency | false
  /**
   * What an operation reserves before it runs, in whole units: by default the cost model's estimate (fields ×
   * list multipliers, see `estimateCost`); or a number (`1` counts operations); or a function of the operation,
   * which may start from `operation.estimate.cost`. The depth guard (`maxDepth`) applies whichever you choose.
   * @default the cost model's estimate
   */
  cost?: number | ((operation: GraphQLOperation<TContext>) => Awaitable<number>)
  /**
   * What an operation actually cost, once it ran (a streamed one: once its stream ends or is cancelled): the
   * reservation is settled to it (the difference charged in full, owed up to `maxDebt`, or given back).
   * `false` keeps the reservation as it is. With the default `cost`, the default counts the fields of the
   * response, read by the operation (`countResultFields`), and of every incremental part (`incrementalCost`);
   * when `data` is null, the estimate stands (resolvers ran). With your own `cost`, nothing is settled unless you
   * pass one.
   * @default the fields of the response, with the default `cost`; else false
   */
  actualCost?:
    | false
    | ((result: ExecutionOutcome, operation: GraphQLOperation<TContext>) => Awaitable<number>)
  /**
   * The client address for the default key. @default the socket address of the Node request in the context
   * (`context.req`, as GraphQL Yoga on Node and Apollo's Express integration give it when you pass it on)
   */
  clientIp?: (operation: GraphQLOperation<TContext>) => string | undefined
}

const GRAPHQL_NAMES = middlewareOptionNames<GraphQLRateLimitOptions>(
  {
    delay: true,
    reservationHorizon: true,
    overrides: true,
    message: true,
    problemDetails: true,
    skipFailedRequests: true,
    skipSuccessfulRequests: true,
    requestWasSuccessful: true,
  },
  {
    actualCost: true,
    clientIp: true,
    maxDepth: true,
    listSize: true,
    slicingArguments: true,
    maxIntrospection: true,
  },
)
const INTROSPECTION_NAMES = namesOf<IntrospectionBound>({ schema: true, type: true })

/** The options resolved: the engine's part, and GraphQL's own, complete. */
export interface GraphQLConfig<TContext> {
  /** What core's engine takes (its `cost` reads the operation's reservation). */
  engine: HttpRateLimitOptions<GraphQLOperation<TContext>>
  model: Required<CostModelOptions>
  cost: number | ((operation: GraphQLOperation<TContext>) => Awaitable<number>) | undefined
  actualCost: ((result: ExecutionOutcome, operation: GraphQLOperation<TContext>) => Awaitable<number>) | false
  clientIp: ((operation: GraphQLOperation<TContext>) => string | undefined) | undefined
}

/**
 * Checks the options once: unknown names, the cost model's values, and a store (and fallback) that can settle
 * (`charge`). Core's engine checks the rest when it is built.
 */
export function resolveGraphQLOptions<TContext>(
  options: GraphQLRateLimitOptions<TContext>,
  where: string,
  defaultActualCost: (result: ExecutionOutcome, operation: GraphQLOperation<TContext>) => number,
): GraphQLConfig<TContext> {
  requireObject(options, 'options', "{ limit: 1000, window: '1m' }")
  rejectUnknownOptions(options, GRAPHQL_NAMES, where)
  const {
    cost,
    actualCost,
    clientIp,
    maxDepth,
    listSize,
    slicingArguments,
    maxIntrospection,
    concurrency,
    ...rest
  } = options
  const model = {
    maxDepth: count(maxDepth ?? COST_MODEL_DEFAULTS.maxDepth, 'maxDepth', 1, '10'),
    listSize: count(listSize ?? COST_MODEL_DEFAULTS.listSize, 'listSize', 0, '10'),
    slicingArguments: names(slicingArguments ?? COST_MODEL_DEFAULTS.slicingArguments),
    maxIntrospection: introspectionBound(maxIntrospection),
  }
  const engine = {
    ...rest,
    concurrency: settledConcurrency(
      concurrency,
      options.store,
      GRAPHQL_DEFAULTS.concurrency,
      'an operation gives its slot back once it is settled, whatever its connection does',
    ),
  }
  if (actualCost !== undefined && actualCost !== false && typeof actualCost !== 'function')
    throw invalid(
      'ERR_RATEWINDOW_INVALID_OPTION',
      'actualCost',
      actualCost,
      'a function of the result, or false',
    )
  if (clientIp !== undefined && typeof clientIp !== 'function')
    throw invalid('ERR_RATEWINDOW_INVALID_OPTION', 'clientIp', clientIp, 'a function of the operation')
  const settles = actualCost ?? (cost === undefined ? defaultActualCost : false)
  if (settles !== false) {
    requireCharge(options.store, 'store')
    requireCharge(options.fallback, 'fallback')
  }
  return { engine, model, cost, actualCost: settles, clientIp }
}

/** `maxIntrospection`, complete: each bound a whole number >= 0. */
function introspectionBound(value: IntrospectionBound | undefined): Required<IntrospectionBound> {
  if (value === undefined) return { ...COST_MODEL_DEFAULTS.maxIntrospection }
  requireObject(value, 'maxIntrospection', '{ schema: 1, type: 10 }')
  rejectUnknownOptions(value, INTROSPECTION_NAMES, '`maxIntrospection`')
  const {
    schema = COST_MODEL_DEFAULTS.maxIntrospection.schema,
    type = COST_MODEL_DEFAULTS.maxIntrospection.type,
  } = value
  return {
    schema: count(schema, 'maxIntrospection.schema', 0, '1'),
    type: count(type, 'maxIntrospection.type', 0, '10'),
  }
}

/** A whole number of at least `min`, checked by core's rule and worded with an example. */
function count(value: unknown, option: string, min: number, example: string): number {
  wholeNumber(value, option, { min, allowed: `a whole number >= ${min}, such as ${example}` })
  return value
}

function names(value: unknown): readonly string[] {
  if (!Array.isArray(value) || !value.every((name) => typeof name === 'string' && name !== ''))
    throw invalid(
      'ERR_RATEWINDOW_INVALID_OPTION',
      'slicingArguments',
      value,
      "argument names, such as ['first', 'last']",
    )
  return Object.freeze([...value])
}

/**
 * Settling charges the difference above the estimate through the store's `charge`: a store without it is refused
 * here, naming it, rather than settling nothing at every request.
 */
function requireCharge(store: unknown, option: 'store' | 'fallback'): void {
  if (store === undefined || store === null || typeof store !== 'object') return
  if (typeof (store as { charge?: unknown }).charge === 'function') return
  const name = (store as object).constructor?.name
  const shown = name && name !== 'Object' ? name : 'this store'
  throw new RateLimitError(
    'ERR_RATEWINDOW_INVALID_OPTION',
    `\`${option}\`: ${shown} has no \`charge\`, so an operation's actual cost could not be settled after it ran. Use a store that charges (MemoryStore, RedisStore, SyncedStore, DurableObjectStore), or pass \`actualCost: false\` to keep each operation's estimate as it is.`,
    { option },
  )
}
