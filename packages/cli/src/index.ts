export type {
  BlockJson,
  GivenKey,
  InspectJson,
  OkJson,
  OverrideJson,
  OverrideListJson,
} from './commands/keys.js'
export type { LimitersJson, TopJson, TopRow } from './commands/scanned.js'
export type { AdminStats, WatchJson } from './commands/watch.js'
export type { CliConfig, LimiterDefinition } from './config.js'
export { CliError, type CliErrorCode, EXIT, type ExitCode } from './errors.js'
export { type RunContext, run } from './run.js'
