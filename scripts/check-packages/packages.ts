/** The packages this repository publishes, as their directories under `packages/` name them. */
import { dirname, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

/** The repository's root. */
export const root = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..')

export const packages = [
  'core',
  'express',
  'koa',
  'fastify',
  'hono',
  'cloudflare',
  'nestjs',
  'otel',
  'prometheus',
  'admin',
  'graphql',
  'testing',
  'trpc',
  'ws',
  'next',
  'elysia',
  'sveltekit',
  'h3',
  'cli',
] as const
export type Package = (typeof packages)[number]
