/**
 * docs/architecture.md's floor plan is the one the checker keeps: its table ("The server's floor
 * plan") lists each room of SERVER_FLOORS (test/repo/floors.ts) on its floor, and nothing else;
 * the modules it names at the top of src/server/ are the ones there. A merge that drops a row, or
 * a room added to the code and not to the plan, fails here.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { repoRoot } from './deps.js';
import { SERVER_FLOORS } from './floors.js';

const root = repoRoot(dirname(fileURLToPath(import.meta.url)));
const doc = readFileSync(join(root, 'docs/architecture.md'), 'utf8');

/** The table's rows: each floor's number and the names in backticks of its room column. */
function tableRows(text: string): { floor: number; names: string[] }[] {
  const section = text.split(/^## /m).find((s) => s.startsWith("The server's floor plan"));
  expect(section, 'docs/architecture.md has a section "The server\'s floor plan"').toBeDefined();
  return [...section!.matchAll(/^\| (\d+) \| ([^|]+) \|/gm)].map((m) => ({
    floor: Number(m[1]),
    names: [...m[2]!.matchAll(/`([^`]+)`/g)].map((n) => n[1]!),
  }));
}

/** A name in the table as a room of the checker: `http/` → server/http, `index.ts` → server. */
const roomOf = (name: string) =>
  name.endsWith('/')
    ? `server/${name.slice(0, -1)}`
    : name === 'index.ts'
      ? 'server'
      : 'server/base';

const rows = tableRows(doc);

describe("docs/architecture.md's floor plan", () => {
  it('has the floors of test/repo/floors.ts, each room on its floor, in order', () => {
    // `room @ floor`, once each (the modules of server/base share one row)
    const inDoc = new Set(rows.flatMap((r) => r.names.map((n) => `${roomOf(n)} @ ${r.floor}`)));
    const inCode = SERVER_FLOORS.flatMap((rooms, i) => rooms.map((r) => `${r} @ ${i + 1}`));
    expect([...inDoc].sort()).toEqual(inCode.sort());
    expect(rows.map((r) => r.floor)).toEqual(SERVER_FLOORS.map((_, i) => i + 1));
  });

  it('names the modules at the top of src/server/ that are their own rooms, and only those', () => {
    const dir = join(root, 'src/server');
    const loose = readdirSync(dir).filter(
      (n) => n.endsWith('.ts') && !statSync(join(dir, n)).isDirectory(),
    );
    const named = rows.flatMap((r) => r.names).filter((n) => !n.endsWith('/'));
    expect(named.sort()).toEqual(loose.sort());
  });

  it('names the file that holds the floors', () => {
    expect(doc).toContain('`SERVER_FLOORS` in `test/repo/floors.ts`');
  });
});
