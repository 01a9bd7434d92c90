/**
 * Which part of a store an error belongs to: a key's own data, or the server (or shard) itself. The stores know
 * their errors (Redis replies), so the classification lives beside them; the circuit breakers and Redis grouping
 * read it.
 */

/** Where a failure belongs: `'key'` for an error about one key's data, `'scope'` for the server or shard. */
export type FailureKind = 'key' | 'scope'

/**
 * Classifies a store error. Key errors are Redis replies about one key's data: `WRONGTYPE`, or a runtime error
 * raised inside the rate limit script (the script reads only the request's own keys). They prove that the
 * server answered, so they never open a circuit breaker. Custom stores may set `kind: 'key'` on an error.
 * Everything else (timeouts, connection errors, `CLUSTERDOWN`, `OOM`, `BUSY`, `LOADING`, `READONLY`, a client
 * that throws) belongs to the store or its shard.
 */
export function failureKind(error: unknown): FailureKind {
  if (typeof error !== 'object' || error === null) return 'scope'
  if ((error as { kind?: unknown }).kind === 'key') return 'key'
  const message = (error as { message?: unknown }).message
  if (typeof message !== 'string') return 'scope'
  if (message.startsWith('WRONGTYPE')) return 'key'
  // Redis 6.2: "ERR Error running script (call to f_…): @user_script:…"; 7+: "ERR user_script:1: …".
  if (/^ERR (Error running script|user_script:)/.test(message)) return 'key'
  return 'scope'
}

/**
 * Whether a call that failed this way, once sent, may still have been applied: not when the server answered it with
 * an error (a Redis error reply: `ERR …`, `WRONGTYPE …`, `OOM …`, `LOADING …`, `CLUSTERDOWN …`: the script did not
 * run, or stopped at that error); yes when the reply was lost (a connection closed, a client's own timeout).
 */
export function mayHaveRun(error: unknown): boolean {
  const message = (error as { message?: unknown } | null | undefined)?.message
  return typeof message !== 'string' || !/^[A-Z][A-Z_]+( |$)/.test(message)
}
