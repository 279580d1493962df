/**
 * The auth-state backend contract (test/helpers/auth-state-backend-contract.ts) on the default
 * backend, one file per state on a real file system; a write is made to fail for a real reason (a
 * directory where the state's file goes), and what a store of the same directory opened
 * read-only may and may not do.
 */
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { FileAuthStateBackend } from '../../src/server/auth-states/backend.js';
import { describeAuthStateBackend } from '../helpers/auth-state-backend-contract.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});
const tempDir = () => {
  const d = mkdtempSync(join(tmpdir(), 'burrow-auth-backend-'));
  dirs.push(d);
  return d;
};

describeAuthStateBackend('FileAuthStateBackend', async () => {
  const dir = join(tempDir(), 'auth-states');
  return {
    backend: new FileAuthStateBackend(dir),
    reopen: async () => new FileAuthStateBackend(dir),
    breakWrite: async (id) => {
      // the state's file cannot replace a directory that holds something
      mkdirSync(join(dir, `${id}.json`));
      writeFileSync(join(dir, `${id}.json`, 'x'), '');
      return async () => rmSync(join(dir, `${id}.json`), { recursive: true });
    },
    debris: async () => readdirSync(dir).filter((n) => !/^auth_[0-9a-f]{16}\.json$/.test(n)),
  };
});

describe('FileAuthStateBackend', () => {
  it('sweeps the temp files of a killed write when opened, and lists only record files', async () => {
    const dir = tempDir();
    writeFileSync(join(dir, '.auth_0000000000000001.json.0123456789ab.tmp'), '{"half');
    writeFileSync(join(dir, 'auth_0000000000000002.json'), 'x');
    writeFileSync(join(dir, 'notes.txt'), 'x');
    const backend = new FileAuthStateBackend(dir);
    expect(readdirSync(dir).sort()).toEqual(['auth_0000000000000002.json', 'notes.txt']);
    expect(await backend.list()).toEqual(['auth_0000000000000002']);
    expect(backend.loadSync()).toEqual([{ id: 'auth_0000000000000002', sealed: 'x' }]);
  });

  it('refuses ids that are not plain names', async () => {
    const backend = new FileAuthStateBackend(tempDir());
    for (const id of ['../x', 'a/b', '', '.hidden']) {
      await expect(backend.write(id, 'x')).rejects.toThrow(/not a valid/);
      await expect(backend.read(id)).rejects.toThrow(/not a valid/);
    }
  });

  it('read-only: creates and sweeps nothing, and refuses writes and deletes', async () => {
    const root = tempDir();
    const dir = join(root, 'auth-states');
    const none = new FileAuthStateBackend(dir, { readOnly: true });
    expect(readdirSync(root)).toEqual([]);
    expect(await none.list()).toEqual([]);
    expect(none.loadSync()).toEqual([]);
    await new FileAuthStateBackend(dir).write('auth_0000000000000003', 'y');
    const temp = '.auth_0000000000000004.json.0123456789ab.tmp';
    writeFileSync(join(dir, temp), '');
    const ro = new FileAuthStateBackend(dir, { readOnly: true });
    expect(readdirSync(dir)).toContain(temp);
    expect(await ro.read('auth_0000000000000003')).toBe('y');
    await expect(ro.write('auth_0000000000000003', 'z')).rejects.toThrow(/read-only/);
    await expect(ro.delete('auth_0000000000000003')).rejects.toThrow(/read-only/);
    expect(await ro.read('auth_0000000000000003')).toBe('y');
  });
});
