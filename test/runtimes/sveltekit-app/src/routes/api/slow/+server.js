import { json } from '@sveltejs/kit'

export const GET = ({ locals }) => json(locals.slowDown)
