import { defineEventHandler } from 'h3'

export default defineEventHandler((event) => ({ remaining: event.context.rateLimit?.remaining }))
