import { describe, expect, it } from 'vitest'
import { successCheck } from '../src/http/success-check.js'

const request = { method: 'GET' }
const response = { statusCode: 404 }

describe('successCheck: requestWasSuccessful by the parameters it declares (issue 32)', () => {
  it('one parameter, or none: the status code', () => {
    const seen: unknown[][] = []
    successCheck((...args: unknown[]) => seen.push(args) > 0)(404, request, response)
    successCheck((status: number) => seen.push([status]) > 0)(404, request, response)
    expect(seen).toEqual([[404], [404]])
  })

  it("two or more: the adapter's request and response, as express-rate-limit calls `(req, res)`", () => {
    const seen: unknown[][] = []
    successCheck((req: unknown, res: unknown) => seen.push([req, res]) > 0)(404, request, response)
    expect(seen).toEqual([[request, response]])
  })

  it('a parameter with a default does not count (`length`): `(status, extra = 1)` gets the status code', () => {
    const seen: unknown[] = []
    successCheck((status: number, extra = 1) => seen.push(status, extra) > 0)(404, request, response)
    expect(seen).toEqual([404, 1])
  })

  it('answers what the check answers, a promise included', async () => {
    expect(successCheck((status: number) => status < 400)(404, request, response)).toBe(false)
    await expect(
      successCheck(async (_req, res: { statusCode: number }) => res.statusCode < 500)(404, request, response),
    ).resolves.toBe(true)
  })
})
