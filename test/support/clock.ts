/** A clock the test drives by hand: the test kit's, under the name the suites know it by. */
export { TestClock as ManualClock } from '@ratewindow/testing'
