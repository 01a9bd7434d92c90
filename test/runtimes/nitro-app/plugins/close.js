import { defineNitroPlugin } from 'nitropack/runtime'
import { redis } from '../utils/limits'

// Nitro closes on SIGTERM: the Redis client goes with it, so the process can end.
export default defineNitroPlugin((nitroApp) => {
  nitroApp.hooks.hook('close', async () => {
    await redis?.quit()
  })
})
