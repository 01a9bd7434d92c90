// Older majors installed under aliases, for the adapter tests: typed as their current majors.
declare module 'express4' {
  import express from 'express'
  export default express
}
declare module 'koa2' {
  import Koa from 'koa'
  export default Koa
}
