/**
 * `@ratewindow/core/support`: the option checks, warnings and metric labels that core's own options go through,
 * for packages built on core, so that their errors and warnings read like core's. An application does not need
 * it. See docs/package-authors.md.
 */
export { invalid, requireObject } from '../support/errors.js'
export { MetricLabels, OTHER_LABEL_VALUE, STORE_DURATION_BUCKETS } from '../support/metric-labels.js'
export { namesOf, type PeerOptionName, rejectUnknownOptions } from '../support/option-names.js'
export { emitWarning, type WarningCode } from '../support/runtime.js'
export { fnOption, wholeNumber } from '../support/validators.js'
