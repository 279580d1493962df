/**
 * `safeOpen` (artifacts/safe-files.ts) as a name an instance chose would reach it: a name that
 * climbs out of the root opens nothing, even where the file outside exists and is a plain file;
 * a root reached through `/proc/<pid>/root` (another mount namespace's view) opens its files.
 */
import { mkdtempSync, realpathSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { safeOpen } from '../../src/server/artifacts/safe-files.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function tree() {
  const top = realpathSync(mkdtempSync(join(tmpdir(), 'burrow-safeopen-')));
  dirs.push(top);
  const root = join(top, 'root');
  mkdirSync(root);
  writeFileSync(join(top, 'secret'), 'host file');
  writeFileSync(join(root, 'mine'), 'artifact');
  return { top, root };
}

describe('safeOpen', () => {
  it.each(['../secret', 'a/../../secret', '..'])(
    'opens nothing for %s, outside the root',
    async (rel) => {
      const { root } = tree();
      const fh = await safeOpen(root, rel);
      await fh?.close();
      expect(fh).toBeUndefined();
    },
  );

  it('opens a file of a root seen through /proc/<pid>/root', async () => {
    const { root } = tree();
    const viaProc = `/proc/${process.pid}/root${root}`;
    const fh = await safeOpen(viaProc, 'mine');
    expect(fh).toBeDefined();
    expect((await fh!.readFile()).toString()).toBe('artifact');
    await fh!.close();
  });
});
