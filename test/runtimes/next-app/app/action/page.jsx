import { limited } from './actions.js'

export const dynamic = 'force-dynamic'

export default function Page() {
  return (
    <form action={limited}>
      <button type="submit">go</button>
    </form>
  )
}
