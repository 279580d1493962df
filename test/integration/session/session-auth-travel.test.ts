/**
 * `session.auth` moves states to and from Playwright's format, with real sessions and a local
 * Playwright: `export()` of the live browser loads into a local `newContext({ storageState })`
 * and is signed in through IndexedDB; a local `context.storageState({ indexedDB: true })` goes in
 * with `import(…, { apply: true })` and signs the session in; `save(name)` run twice keeps one
 * state; `delete`.
 */
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AuthStateNotFoundError, openSession } from 'burrow-sandbox';
import { EXTRA_OK, startIdbSite, type IdbSite } from '../../helpers/idb-site.js';
import { sessionServer } from '../../e2e/fixtures/session-server.js';

const env = sessionServer('bst-');
const files = mkdtempSync(join(tmpdir(), 'bst-files-'));
let site: IdbSite;
let local: Browser;
beforeAll(async () => {
  [site, local] = await Promise.all([
    startIdbSite(),
    chromium.launch({ executablePath: '/usr/lib/chromium/chromium', args: ['--no-sandbox'] }),
  ]);
});
afterAll(async () => {
  await local?.close();
  await site?.close();
  rmSync(files, { recursive: true, force: true });
});

async function home(page: Page) {
  await page.goto(`${site.origin}/`);
  await page.waitForFunction(() => document.getElementById('status')?.textContent !== '…');
  return { status: await page.textContent('#status'), extra: await page.textContent('#extra') };
}
async function logIn(page: Page) {
  await page.goto(`${site.origin}/login`);
  await page.waitForFunction(
    () => document.getElementById('status')?.textContent === 'Signed in as alice',
  );
}
const SIGNED_IN = { status: 'Signed in as alice', extra: EXTRA_OK };
const SIGNED_OUT = { status: 'Signed out', extra: 'none' };

describe('session.auth export / import', () => {
  it('export() of the live browser signs a local Playwright context in', async () => {
    await using session = await openSession(env.remote);
    await logIn(session.page);
    const path = join(files, 'state.json');
    const state = await session.auth.export(undefined, { path });
    expect(statSync(path).mode & 0o777).toBe(0o600);
    expect(JSON.parse(readFileSync(path, 'utf8'))).toEqual(state);
    // the throwaway state it went through is gone
    expect((await session.auth.list()).filter((s) => s.name?.startsWith('burrow-export-'))).toEqual(
      [],
    );

    const context = await local.newContext({ storageState: path });
    expect(await home(await context.newPage())).toEqual(SIGNED_IN);
    await context.close();
  });

  it('import() of a local Playwright state with apply signs the session in', async () => {
    const context = await local.newContext();
    await logIn(await context.newPage());
    const storageState = await context.storageState({ indexedDB: true });
    await context.close();

    await using session = await openSession(env.remote);
    expect(await home(session.page)).toEqual(SIGNED_OUT);
    const saved = await session.auth.import(storageState, { name: 'local', apply: true });
    expect(saved).toEqual({ id: expect.stringMatching(/^auth_/), name: 'local' });
    expect(await home(session.page)).toEqual(SIGNED_IN);

    // by name, and again from a file: the same state, updated in place
    expect((await session.auth.export('local')).origins[0]?.origin).toBe(site.origin);
    const path = join(files, 'local.json');
    await session.auth.export('local', { path });
    expect(await session.auth.import(path, { name: 'local' })).toEqual(saved);
  });

  it('save(name) twice keeps one state, with the latest data; delete removes it', async () => {
    await using session = await openSession(env.remote);
    const first = await session.auth.save('once');
    await logIn(session.page);
    const second = await session.auth.save('once');
    expect(second).toEqual(first);
    expect((await session.auth.list()).filter((s) => s.name === 'once')).toHaveLength(1);
    const exported = await session.auth.export('once');
    expect(exported.origins.map((o) => o.origin)).toEqual([site.origin]);

    await session.auth.delete('once');
    await expect(session.auth.apply('once')).rejects.toThrow(AuthStateNotFoundError);
  });
});
