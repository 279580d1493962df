/**
 * session.auth against a real server and real Chromium, with a local site whose login sets an
 * HttpOnly cookie and a localStorage token: save in one session, apply in the next.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  AmbiguousAuthStateError,
  AuthStateNotFoundError,
  Burrow,
  openSession,
  type PlaywrightSession,
} from 'burrow-sandbox';
import {
  DEMO_PASSWORD,
  DEMO_USER,
  serveDemoSite,
  type DemoSite,
} from '../../../src/cli/demo-site.js';
import { sessionServer } from '../../e2e/fixtures/session-server.js';

const env = sessionServer('bsa-');
let site: DemoSite;
let remote: { baseUrl: string; apiKey: string };
beforeAll(async () => {
  remote = env.remote;
  site = await serveDemoSite();
});
afterAll(() => site?.close());

async function logIn(session: PlaywrightSession): Promise<void> {
  const { page } = session;
  await page.goto(`${site.url}/login`);
  await page.fill('input[name=user]', DEMO_USER);
  await page.fill('input[name=password]', DEMO_PASSWORD);
  await page.click('button[type=submit]');
  await page.waitForSelector('#status:text("signed-in")');
}

async function account(session: PlaywrightSession): Promise<[string, string]> {
  await session.page.goto(`${site.url}/account`);
  return [
    (await session.page.textContent('#status')) ?? '',
    (await session.page.textContent('#token')) ?? '',
  ];
}

describe('session.auth', () => {
  it('save in one session, authState in the next: HttpOnly cookie and localStorage come back', async () => {
    let saved;
    {
      await using first = await openSession(remote);
      expect(await account(first)).toEqual(['signed-out', 'token-missing']);
      await logIn(first);
      expect(await account(first)).toEqual(['signed-in', 'token-present']);
      saved = await first.auth.save('site-a');
      expect(saved).toEqual({ id: expect.any(String), name: 'site-a' });
      expect(await first.auth.list()).toContainEqual({ id: saved.id, name: 'site-a' });
    }
    {
      await using fresh = await openSession(remote);
      expect(await account(fresh)).toEqual(['signed-out', 'token-missing']);
    }
    {
      await using second = await openSession({ ...remote, authState: 'site-a' });
      expect(await account(second)).toEqual(['signed-in', 'token-present']);
    }
    {
      await using byId = await openSession({ ...remote, authState: saved.id });
      expect(await account(byId)).toEqual(['signed-in', 'token-present']);
    }
  });

  it('update overwrites a state from the current browser and may rename it; apply loads it', async () => {
    await using session = await openSession(remote);
    const empty = await session.auth.save('site-b');
    await logIn(session);
    const updated = await session.auth.update('site-b', { name: 'site-b2' });
    expect(updated).toEqual({ id: empty.id, name: 'site-b2' });
    await expect(session.auth.apply('site-b')).rejects.toThrow(AuthStateNotFoundError);

    await using other = await openSession(remote);
    expect(await account(other)).toEqual(['signed-out', 'token-missing']);
    expect(await other.auth.apply('site-b2')).toEqual({ id: empty.id, name: 'site-b2' });
    expect(await account(other)).toEqual(['signed-in', 'token-present']);
  });

  it('a name shared by several states is an error that lists them', async () => {
    await using session = await openSession(remote);
    // save keeps one state per name; the spec's save_auth always adds one, so two can exist
    const a = await session.auth.save('twin');
    expect(await session.auth.save('twin')).toEqual(a);
    await using client = new Burrow(remote);
    const raw = await client.browser.saveAuth(session.id, { name: 'twin' });
    const b = { id: raw.auth_state_id, name: 'twin' };
    const refused: unknown = await session.auth.save('twin').catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(AmbiguousAuthStateError);
    expect(refused).toMatchObject({ ids: [a.id, b.id] });
    const error: unknown = await session.auth.apply('twin').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(AmbiguousAuthStateError);
    expect(error).toMatchObject({ code: 'auth_state_ambiguous', ids: [a.id, b.id] });
    expect((error as Error).message).toContain(a.id);
    expect((error as Error).message).toContain(b.id);
    await expect(session.auth.update('twin')).rejects.toThrow(AmbiguousAuthStateError);
    expect(await session.auth.apply(b.id)).toEqual(b); // an id is never ambiguous
  });
});
