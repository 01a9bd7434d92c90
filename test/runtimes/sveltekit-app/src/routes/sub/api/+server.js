import { json } from '@sveltejs/kit'

export const GET = ({ locals }) => json({ remaining: locals.rateLimit?.remaining })
