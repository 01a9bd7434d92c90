import { runSimulation } from './simulation.js'

await runSimulation()
