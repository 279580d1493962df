/**
 * The floor plan checked where it is written: the import rules of docs/architecture.md, applied
 * to the module graph of src/ and adapters/ (test/repo/deps.ts, with the rules as data in
 * test/repo/floors.ts). Prints each import that breaks a rule as `file:line imports 'spec' →
 * target: rule`, each import cycle and each room of src/server/ without a floor, and exits 1 if
 * there is any. `npm run lint` runs it.
 */
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { floorPlanProblems, repoRoot } from '../test/repo/deps.js';

const problems = floorPlanProblems(repoRoot(dirname(fileURLToPath(import.meta.url))));
for (const line of problems) console.error(line);
if (problems.length > 0) {
  console.error(`check-deps: ${problems.length} break(s) of the floor plan`);
  process.exit(1);
}
console.log('check-deps: every import keeps the floor plan of docs/architecture.md');
