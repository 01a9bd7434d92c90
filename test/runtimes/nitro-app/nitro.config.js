import { defineNitroConfig } from 'nitropack/config'

export default defineNitroConfig({ preset: 'node-server', logLevel: 1, compatibilityDate: '2026-01-01' })
