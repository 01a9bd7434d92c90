/**
 * The projects the tarballs are installed into, as users' projects would be: which of our packages, beside which
 * registry packages (one project per framework major, or per set that must or must not be present), with which
 * programs typechecked and run in them, and with which TypeScript versions.
 */

import { installNext, NEXT_INSTALLS } from '../next-installs.js'
import { runOnRedis, startRedis } from './checks/redis.js'
import { runInWorkerd } from './checks/workerd.js'
import type { Package } from './packages.js'
import {
  EXPRESS_PROGRAM,
  FASTIFY_MIGRATION_PROGRAM,
  FASTIFY_PROGRAM,
  HONO_PROGRAM,
  KOA_PROGRAM,
} from './programs/adapters.js'
import { ADMIN_KOA_PROGRAM, ADMIN_PROGRAM, adminRun, CLI_PROGRAM, cliRun } from './programs/cli-admin.js'
import { CLOUDFLARE_PROGRAM, cloudflareRun } from './programs/cloudflare.js'
import {
  CORE_PROGRAM,
  coreRun,
  OTEL_PROGRAM,
  otelRun,
  PROMETHEUS_PROGRAM,
  prometheusRun,
} from './programs/core.js'
import { ELYSIA_PROGRAM, elysiaRun } from './programs/elysia.js'
import {
  GRAPHQL_APOLLO_PROGRAM,
  GRAPHQL_ENVELOP_PROGRAM,
  GRAPHQL_YOGA_PROGRAM,
  graphqlRun,
} from './programs/graphql.js'
import { H3_1_PROGRAM, H3_2_PROGRAM, h3Run } from './programs/h3.js'
import { esmAndCjs, type ModuleSystem } from './programs/load.js'
import { NEST_PROGRAM, NEST_THROTTLER_PROGRAM, NEST_WEBSOCKETS_PROGRAM } from './programs/nest.js'
import { NEXT_PROGRAM, nextRun } from './programs/next.js'
import { serverRuns } from './programs/servers.js'
import { SVELTEKIT_PROGRAM, SVELTEKIT_RUN } from './programs/sveltekit.js'
import { KIT_SUITES, type Suite, TESTING_PROGRAM } from './programs/testing.js'
import { TRPC_CLIENT_PROGRAM, TRPC_SERVER_PROGRAM, trpcRun } from './programs/trpc.js'
import { SOCKET_IO_PROGRAM, socketIoRun, WS_HONO_PROGRAM, WS_PROGRAM, wsRun } from './programs/ws.js'
import type { Kind } from './report.js'

/** The TypeScript versions a project is checked with: 5.9, and 7 (the native port). */
export type Version = '5.9' | '7'

/** A check of a project's own, beyond its typechecks, runs and suites. */
export interface ProjectCheck {
  kind: Kind
  name: string
  /** Called as the project is written, before its install; returns the check's action, run once installed. */
  begin: (dir: string) => () => Promise<void>
}

export interface Project {
  /** Directory name under the work directory. */
  name: string
  /** Our packages installed from their tarballs. */
  tarballs: Package[]
  /** Registry packages, `name@range` (npm aliases allowed). */
  dependencies: string[]
  /** Typecheck programs: file name → source, written to both the ESM and the CJS sub-project. */
  programs: Record<string, string>
  /** Runtime programs: a `.mjs` and a `.cjs` file each, run with node; each prints `ok`. */
  runs: Record<string, string>
  /** TypeScript versions to check with. */
  typescripts: Version[]
  /** Whether the project must compile with no `@types/node` at all (core alone, core with otel, Workers). */
  noNodeTypes?: boolean
  /**
   * Skip lib checks with TypeScript 7 too, as the framework's own projects do (create-next-app sets skipLibCheck:
   * Next's declarations need the DOM lib and its compiled webpack's types, and fail lib checks whatever ours).
   */
  skipLibCheck?: boolean
  /** Compile with `experimentalDecorators` and `emitDecoratorMetadata`, as Nest projects do. */
  decorators?: boolean
  /** Typechecks left out, each for a reason of the project's own dependencies (said where it is set). */
  skip?: (check: { system: ModuleSystem; resolution: string; version: Version; program: string }) => boolean
  /** Test suites run by their runner in the project. */
  suites?: Suite[]
  /** Checks of the project's own (a Worker in workerd, a run on Redis). */
  checks?: ProjectCheck[]
  /**
   * An install shared with another check, whose node_modules is linked into the project before npm installs it
   * there (npm keeps what already satisfies the project's dependencies and installs the rest): resolves with its
   * directory.
   */
  preinstalled?: () => Promise<string>
}

export const projects: Project[] = [
  {
    name: 'core-only',
    tarballs: ['core'],
    dependencies: [],
    programs: { 'core.ts': CORE_PROGRAM },
    runs: esmAndCjs('run-core', coreRun),
    typescripts: ['5.9', '7'],
    noNodeTypes: true,
  },
  {
    // Overrides set by one limiter and honoured by another's next decision, on real Redis: a standalone server and
    // a Cluster.
    name: 'redis-overrides',
    tarballs: ['core'],
    dependencies: ['ioredis@5'],
    programs: {},
    runs: {},
    typescripts: [],
    checks: [
      {
        kind: 'redis run',
        name: 'redis-overrides: the packed core on a standalone redis-server and a 3-master Cluster honours an override, a block and an unblock set by another limiter at the next decision',
        // Started as the project is written, so that the Cluster forms while the project installs.
        begin: (dir) => {
          const started = startRedis()
          return () => runOnRedis(dir, started)
        },
      },
    ],
  },
  {
    name: 'otel',
    tarballs: ['core', 'otel'],
    dependencies: ['@opentelemetry/api@1', '@opentelemetry/sdk-metrics@3'],
    programs: { 'otel.ts': OTEL_PROGRAM },
    runs: esmAndCjs('run-otel', otelRun),
    typescripts: ['5.9', '7'],
    noNodeTypes: true,
  },
  {
    name: 'prometheus',
    tarballs: ['core', 'prometheus'],
    dependencies: ['prom-client@15', '@types/node@20'],
    programs: { 'prometheus.ts': PROMETHEUS_PROGRAM },
    runs: esmAndCjs('run-prometheus', prometheusRun),
    typescripts: ['5.9', '7'],
  },
  {
    name: 'cli',
    tarballs: ['core', 'admin', 'cli'],
    dependencies: ['@types/node@20'],
    programs: { 'cli.ts': CLI_PROGRAM },
    runs: esmAndCjs('run-cli', cliRun),
    typescripts: ['5.9', '7'],
  },
  {
    name: 'admin',
    tarballs: ['core', 'admin'],
    dependencies: ['express@5', '@types/express@5', 'fastify@5', 'hono@4', '@types/node@20'],
    programs: { 'admin.ts': ADMIN_PROGRAM },
    runs: esmAndCjs('run-admin', adminRun),
    typescripts: ['5.9', '7'],
  },
  {
    name: 'admin-koa',
    tarballs: ['core', 'admin'],
    dependencies: ['koa@3', '@types/koa@3', '@types/node@20'],
    programs: { 'admin-koa.ts': ADMIN_KOA_PROGRAM },
    runs: {},
    typescripts: ['5.9', '7'],
  },
  {
    name: 'express-4',
    tarballs: ['core', 'express'],
    dependencies: ['express@4', '@types/express@4'],
    programs: { 'express.ts': EXPRESS_PROGRAM },
    runs: serverRuns('express'),
    typescripts: ['5.9', '7'],
  },
  {
    name: 'express-5',
    tarballs: ['core', 'express'],
    dependencies: ['express@5', '@types/express@5'],
    programs: { 'express.ts': EXPRESS_PROGRAM },
    runs: serverRuns('express'),
    typescripts: ['5.9', '7'],
  },
  {
    name: 'koa-2',
    tarballs: ['core', 'koa'],
    dependencies: ['koa@2', '@types/koa@2'],
    programs: { 'koa.ts': KOA_PROGRAM },
    runs: serverRuns('koa'),
    typescripts: ['5.9', '7'],
  },
  {
    name: 'koa-3',
    tarballs: ['core', 'koa'],
    dependencies: ['koa@3', '@types/koa@3'],
    programs: { 'koa.ts': KOA_PROGRAM },
    runs: serverRuns('koa'),
    typescripts: ['5.9', '7'],
  },
  {
    name: 'hono-4',
    tarballs: ['core', 'hono'],
    dependencies: ['hono@4', '@hono/node-server@2', '@types/node@20'],
    programs: { 'hono.ts': HONO_PROGRAM },
    runs: serverRuns('hono'),
    typescripts: ['5.9', '7'],
  },
  {
    // A Workers project: Hono and the Durable Object store, typed by @cloudflare/workers-types alone.
    name: 'cloudflare-workers',
    tarballs: ['core', 'hono', 'cloudflare'],
    dependencies: ['hono@4', '@cloudflare/workers-types@5'],
    programs: { 'worker.ts': CLOUDFLARE_PROGRAM },
    runs: esmAndCjs('run-cloudflare', cloudflareRun),
    typescripts: ['5.9', '7'],
    noNodeTypes: true,
    checks: [
      {
        kind: 'workerd bundle+run',
        name: 'cloudflare-workers: a Worker bundled from the tarballs answers 200, 200, 429 in workerd (no nodejs_compat), then honours an override and a block set from its admin routes at the next request',
        begin: (dir) => () => runInWorkerd(dir),
      },
    ],
  },
  {
    name: 'fastify-4',
    tarballs: ['core', 'fastify'],
    dependencies: ['fastify@4', '@types/node@20', '@fastify/rate-limit@9'],
    programs: { 'fastify.ts': FASTIFY_PROGRAM, 'fastify-migration.ts': FASTIFY_MIGRATION_PROGRAM },
    runs: serverRuns('fastify'),
    typescripts: ['5.9', '7'],
  },
  {
    name: 'fastify-5',
    tarballs: ['core', 'fastify'],
    dependencies: ['fastify@5', '@types/node@20', '@fastify/rate-limit@10'],
    programs: { 'fastify.ts': FASTIFY_PROGRAM, 'fastify-migration.ts': FASTIFY_MIGRATION_PROGRAM },
    runs: serverRuns('fastify'),
    typescripts: ['5.9', '7'],
  },
  ...(
    [
      ['12', 'express'],
      ['12', 'fastify'],
      ['11', 'express'],
      ['11', 'fastify'],
    ] as const
  ).map(
    ([nest, platform]): Project => ({
      name: `nestjs-${nest}-${platform}`,
      // @ratewindow/ws is an optional peer of @ratewindow/nestjs, for its `websockets` entry alone (Nest 12 here):
      // the Nest 11 projects go without it, and their runs show that the main entry does not need it.
      tarballs: nest === '12' ? ['core', 'ws', 'nestjs'] : ['core', 'nestjs'],
      dependencies: [
        `@nestjs/common@${nest}`,
        `@nestjs/core@${nest}`,
        `@nestjs/platform-${platform}@${nest}`,
        '@nestjs/throttler@6',
        // The gateway entry (Nest 12 only), its optional peer beside the HTTP platform.
        ...(nest === '12' ? ['@nestjs/websockets@12'] : []),
        'reflect-metadata@0.2',
        'rxjs@7',
        '@types/node@20',
        ...(platform === 'express' ? ['@types/express@5'] : []),
      ],
      programs: {
        'nestjs.ts': NEST_PROGRAM,
        'nestjs-throttler.ts': NEST_THROTTLER_PROGRAM,
        ...(nest === '12' ? { 'nestjs-websockets.ts': NEST_WEBSOCKETS_PROGRAM } : {}),
      },
      runs: serverRuns(`nestjs-${platform}`),
      typescripts: ['5.9', '7'],
      decorators: true,
      // Nest 12 ships ESM only. Under moduleResolution node16 TypeScript refuses a require() of ESM (nodenext
      // allows it, as Node 20.19+ does: the .cjs runs below load it), so a CommonJS program cannot compile
      // there, nor, with lib checks on (TypeScript 7), do @nestjs/throttler 6's CommonJS declarations.
      skip:
        nest === '12'
          ? ({ system, resolution, version, program }) =>
              resolution === 'node16' &&
              (system === 'cjs' || (version === '7' && program === 'nestjs-throttler.ts'))
          : undefined,
    }),
  ),
  {
    // GraphQL Yoga on graphql 17, the major a new Yoga project installs (Yoga 5 accepts 15 to 17). TypeScript 5.9
    // only, with skipLibCheck as Yoga projects set it: Yoga 5's own declarations do not compile with lib checks on
    // (URLPattern, AsyncDisposableStack, lru-cache's Map iterators), whatever ours. The Envelop plugin's
    // declarations are checked with lib checks on in the next project, beside Envelop alone.
    name: 'graphql-yoga',
    tarballs: ['core', 'graphql'],
    dependencies: ['graphql-yoga@5', 'graphql@17', '@types/node@20'],
    programs: { 'graphql-yoga.ts': GRAPHQL_YOGA_PROGRAM },
    runs: esmAndCjs('run-yoga', (system) => graphqlRun(system, 'yoga')),
    typescripts: ['5.9'],
  },
  {
    // Apollo Server 5 on graphql 16, the only major it accepts; and Envelop alone, on the same install.
    name: 'graphql-apollo-envelop',
    tarballs: ['core', 'graphql'],
    dependencies: ['@apollo/server@5', '@envelop/core@5', 'graphql@16', '@types/node@20'],
    programs: { 'graphql-apollo.ts': GRAPHQL_APOLLO_PROGRAM, 'graphql-envelop.ts': GRAPHQL_ENVELOP_PROGRAM },
    runs: esmAndCjs('run-apollo', (system) => graphqlRun(system, 'apollo')),
    typescripts: ['5.9', '7'],
  },
  {
    // tRPC v11: the server's standalone and fetch adapters, and its client. The client program with TypeScript 5.9
    // only (skipLibCheck): @trpc/client's own declarations name the DOM's `RequestInfo`, which a Node project's
    // lib has not, whatever ours; the server program is checked with lib checks on.
    name: 'trpc',
    tarballs: ['core', 'trpc'],
    dependencies: ['@trpc/server@11', '@trpc/client@11', '@types/node@20'],
    programs: { 'trpc-server.ts': TRPC_SERVER_PROGRAM, 'trpc-client.ts': TRPC_CLIENT_PROGRAM },
    runs: esmAndCjs('run-trpc', trpcRun),
    typescripts: ['5.9', '7'],
    skip: ({ version, program }) => version === '7' && program === 'trpc-client.ts',
  },
  {
    // ws, @fastify/websocket, and Hono with @hono/node-ws, beside each other.
    name: 'ws',
    tarballs: ['core', 'ws'],
    dependencies: [
      'ws@8',
      '@types/ws@8',
      'fastify@5',
      '@fastify/websocket@11',
      'hono@4',
      '@hono/node-server@1',
      '@hono/node-ws@1',
      '@types/node@20',
    ],
    programs: { 'ws.ts': WS_PROGRAM, 'ws-hono.ts': WS_HONO_PROGRAM },
    runs: esmAndCjs('run-ws', wsRun),
    typescripts: ['5.9', '7'],
    // Hono's own declarations of its WebSocket helper (hono/ws) name DOM types (a generic MessageEvent, CloseEvent)
    // that lib ES2023 with @types/node lacks: with lib checks on (TypeScript 7), they fail in any such project.
    skip: ({ version, program }) => version === '7' && program === 'ws-hono.ts',
  },
  ...([15, 16] as const).map(
    (major): Project => ({
      // Next ships CommonJS (no `exports` map: ESM imports name `next/server.js`, as the package does).
      name: `next-${major}`,
      tarballs: ['core', 'next'],
      // The versions test/runtimes/next.test.ts builds apps with, from its install (scripts/next-installs.ts).
      dependencies: [
        ...(['next', 'react', 'react-dom'] as const).map((name) => `${name}@${NEXT_INSTALLS[major][name]}`),
        '@types/react@19',
        '@types/node@20',
      ],
      preinstalled: () => installNext(major),
      programs: { 'next.ts': NEXT_PROGRAM },
      runs: esmAndCjs('run-next', nextRun),
      typescripts: ['5.9', '7'],
      skipLibCheck: true,
    }),
  ),
  {
    // Elysia is ESM first (its docs and @elysiajs/node): an ESM project, its app run on Node by @elysiajs/node.
    name: 'elysia-1',
    tarballs: ['core', 'elysia'],
    dependencies: ['elysia@1', '@elysiajs/node@1', '@types/node@20'],
    programs: { 'elysia.ts': ELYSIA_PROGRAM },
    runs: { 'run-elysia.mjs': elysiaRun },
    typescripts: ['5.9', '7'],
    // Elysia's own declarations import Bun's types (`bun`, an optional peer) and fail TypeScript 7's lib checks
    // whatever ours: checked as Elysia projects are, with skipLibCheck.
    skipLibCheck: true,
    skip: ({ system }) => system === 'cjs',
  },
  {
    // SvelteKit 2 (its peers Svelte and Vite come with it). ESM only, as SvelteKit apps are: no CJS program or run.
    // skipLibCheck, as SvelteKit's generated tsconfig sets it: Kit's declarations need Vite's and Svelte's.
    name: 'sveltekit-2',
    tarballs: ['core', 'sveltekit'],
    dependencies: ['@sveltejs/kit@2', '@types/node@20'],
    programs: { 'sveltekit.ts': SVELTEKIT_PROGRAM },
    runs: { 'run-sveltekit.mjs': SVELTEKIT_RUN },
    typescripts: ['5.9', '7'],
    skipLibCheck: true,
    skip: ({ system }) => system === 'cjs',
  },
  {
    // h3 2 ships ESM only: no CJS program or run. skipLibCheck with TypeScript 7 too: h3 2's own declarations name
    // DOM types (Crypto, MimeType, HeadersInit) that lib ES2023 with @types/node lacks, whatever ours.
    name: 'h3-2',
    tarballs: ['core', 'h3'],
    dependencies: ['h3@2', '@types/node@20'],
    programs: { 'h3.ts': H3_2_PROGRAM },
    runs: { 'run-h3.mjs': h3Run('esm', 2) },
    typescripts: ['5.9', '7'],
    skipLibCheck: true,
    skip: ({ system }) => system === 'cjs',
  },
  {
    // h3 1, as Nitro 2 and Nuxt 3 and 4 bring it. skipLibCheck with TypeScript 7 too: h3 1's declarations import
    // crossws's, which name DOM types (MessagePort, EventListenerOrEventListenerObject) that lib ES2023 lacks.
    name: 'h3-1',
    tarballs: ['core', 'h3'],
    dependencies: ['h3@1', '@types/node@20'],
    programs: { 'h3.ts': H3_1_PROGRAM },
    runs: esmAndCjs('run-h3', (system) => h3Run(system, 1)),
    typescripts: ['5.9', '7'],
    skipLibCheck: true,
  },
  {
    // Socket.IO alone: the entry needs neither ws's types nor Hono.
    name: 'socket-io',
    tarballs: ['core', 'ws'],
    dependencies: ['socket.io@4', 'socket.io-client@4', '@types/node@20'],
    programs: { 'socket-io.ts': SOCKET_IO_PROGRAM },
    runs: esmAndCjs('run-socket-io', socketIoRun),
    typescripts: ['5.9', '7'],
  },
  {
    name: 'testing',
    tarballs: ['core', 'express', 'testing'],
    dependencies: ['express@5', '@types/express@5', 'supertest@7', 'vitest@3', 'jest@30', '@types/node@20'],
    programs: { 'testing.ts': TESTING_PROGRAM },
    runs: {},
    typescripts: ['5.9', '7'],
    suites: KIT_SUITES,
  },
]
