/**
 * Two stores on one backend, as two nodes of a cluster on its database (here the default file
 * backend on one directory, and no notice between them): with `shared`, what one saves, replaces
 * or deletes is listed, read, replaced by name and deleted through the other at once; without
 * it, the other goes by what it loaded (a node then relies on the database's notices).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { AuthStore } from '../../src/server/auth-states/store.js';
import type { BrowserAuthData } from '../../src/server/instances/runtime.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

const data = (value: string): BrowserAuthData => ({
  cookies: [{ name: 'sid', value, domain: 'example.test', path: '/' }],
  localStorage: {},
  sessionStorage: {},
});

/** Two stores on one data directory and key, opened before anything is saved. */
async function twoNodes(shared: boolean): Promise<[AuthStore, AuthStore]> {
  const dir = mkdtempSync(join(tmpdir(), 'burrow-auth-shared-'));
  dirs.push(dir);
  const env = { BURROW_SECRET_KEY: randomBytes(32).toString('base64') };
  const open = () => new AuthStore(dir, { env, warn: () => {}, shared });
  const [a, b] = [open(), open()];
  await Promise.all([a.ready, b.ready]);
  return [a, b];
}

describe('AuthStore on a backend other processes write', () => {
  it('lists and reads at once what the other saved', async () => {
    const [one, two] = await twoNodes(true);
    const { id } = await one.save('login', data('alpha'));
    // by id: read from the backend, the id being new to this store
    expect((await two.fetch(id)).data.cookies[0]!.value).toBe('alpha');
    const other = await one.save('other', data('beta'));
    await two.sync();
    expect(two.list()).toEqual([
      { id, name: 'login' },
      { id: other.id, name: 'other' },
    ]);
  });

  it('replaces by name the state the other saved, instead of adding a second of that name', async () => {
    const [one, two] = await twoNodes(true);
    const { id } = await one.save('login', data('alpha'));
    const replaced = await two.upsert('login', data('beta'));
    expect(replaced.id).toBe(id);
    await one.refresh(id); // as the other's notice would
    expect((await one.fetch(id)).data.cookies[0]!.value).toBe('beta');
    expect(one.named('login')).toEqual([id]);
  });

  it('deletes what the other saved, and stops listing what the other deleted', async () => {
    const [one, two] = await twoNodes(true);
    const { id } = await one.save('login', data('alpha'));
    await two.delete(id);
    await one.sync();
    expect(one.list()).toEqual([]);
    await expect(one.fetch(id)).rejects.toMatchObject({ code: 'auth_state_not_found' });
  });

  it('without shared, goes by what it loaded', async () => {
    const [one, two] = await twoNodes(false);
    const { id } = await one.save('login', data('alpha'));
    await two.sync();
    expect(two.list()).toEqual([]);
    await expect(two.fetch(id)).rejects.toMatchObject({ code: 'auth_state_not_found' });
  });
});
