import { resolve } from 'node:path'

// The app is built in <cache>/apps/<entry>, its dependencies installed in <cache>/node_modules: both roots there.
const root = resolve(import.meta.dirname, '..', '..')

export default { outputFileTracingRoot: root, turbopack: { root } }
