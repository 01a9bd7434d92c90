/**
 * `requestWasSuccessful`, the success check of `skipFailedRequests` and `skipSuccessfulRequests`: its public type,
 * and the form the engine calls, chosen once by how many parameters the function declares.
 */
import type { Awaitable } from '../stores/types.js'

/**
 * What counts as a successful response, for `skipFailedRequests` and `skipSuccessfulRequests`, sync or async. A
 * function of one parameter is called with the status code; one of two parameters (express-rate-limit's
 * `(req, res)`) with the adapter's request and response: Express `(req, res)`, Koa `(ctx, ctx.response)`,
 * Fastify `(request, reply)`, Hono `(c, c.res)`, Nest the platform's request and response. Asked once the
 * response was sent; true (exactly) is a success.
 *
 * NOTE: TypeScript types a callback's parameters by position, never by how many the callback declares, so the
 * first one is typed as both (`number & Req`): read it as the status code in a function of one parameter, as the
 * request in a function of two. A union of the two forms would leave `(statusCode) => …` untyped.
 */
export type RequestWasSuccessful<Req = unknown, Res = unknown> = (
  statusCodeOrRequest: number & Req,
  response: Res,
) => Awaitable<boolean>

/** A success check with every argument: the status code, and the adapter's request and response. */
export type SuccessCheck<Req> = (statusCode: number, request: Req, response: unknown) => unknown

/**
 * `requestWasSuccessful` by its form: a function of one parameter (or none) gets the status code, one of two or
 * more the adapter's request and response (`length` counts the parameters before the first with a default).
 */
export function successCheck<Req, Res>(check: RequestWasSuccessful<Req, Res>): SuccessCheck<Req> {
  if (check.length < 2) {
    const byStatus = check as (statusCode: number) => unknown
    return (statusCode) => byStatus(statusCode)
  }
  const byArguments = check as (request: Req, response: unknown) => unknown
  return (_statusCode, request, response) => byArguments(request, response)
}
