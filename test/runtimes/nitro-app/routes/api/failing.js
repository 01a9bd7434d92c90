import { defineEventHandler, getQuery, setResponseStatus } from 'h3'

export default defineEventHandler((event) => {
  setResponseStatus(event, Number(getQuery(event).status ?? 200))
  return 'answered'
})
