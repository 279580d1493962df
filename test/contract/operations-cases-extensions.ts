/**
 * The contract's cases for burrow's extensions of the API (operations.test.ts runs them, after
 * operations-cases-instances.ts): downloads and recordings, hand-off and session time, auth
 * states in Playwright's format, browser extensions, profiles, keys, the node and the version.
 * Ordered: later cases use what earlier ones made (the download, recording, hand-off, extension).
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { Readable } from 'node:stream';
import { chromium } from 'playwright-core';
import { expect } from 'vitest';
import {
  AuthenticationError,
  BadRequestError,
  Burrow,
  NotFoundError,
} from '../../src/client/index.js';
import type { OperationId } from '../../src/api/index.js';
import { testServer } from '../helpers/server.js';
import { makeZip, testExtension } from '../helpers/zip.js';
import { authStateId } from './operations-cases-instances.js';
import {
  browserId,
  client,
  pre,
  raw422,
  server,
  ubuntuId,
  type Case,
} from './operations-harness.js';

let downloadId = '';
let recordingId = '';
let handoffId = '';
let extensionId = '';

export const extensionCases = {
  // burrow extensions: downloads and recordings (src/api/artifacts.ts), while the instances run
  listDownloads: {
    ok: async () => {
      // a page downloads a data: URL through a link with a `download` attribute
      const { cdp_url } = await client.browser.cdpUrl(browserId);
      const browser = await chromium.connectOverCDP(cdp_url);
      try {
        const page = browser.contexts()[0]!.pages()[0]!;
        await page.setContent(
          '<a id="d" download="contract.txt" href="data:text/plain,contract%20bytes">d</a>',
        );
        await Promise.all([page.waitForEvent('download'), page.click('#d')]);
      } finally {
        await browser.close();
      }
      let list: Awaited<ReturnType<typeof client.downloads.list>> = [];
      for (let i = 0; i < 50 && list[0]?.state !== 'completed'; i++) {
        list = await client.downloads.list(browserId);
        await new Promise((r) => setTimeout(r, 100));
      }
      expect(list).toEqual([expect.objectContaining({ filename: 'contract.txt', size: 14 })]);
      downloadId = list[0]!.id;
    },
    bad: async () => {
      await expect(client.downloads.list('inst_missing')).rejects.toBeInstanceOf(NotFoundError);
      await pre(client.downloads.list(''));
    },
  },
  getDownload: {
    ok: async () => {
      const res = await client.downloads.get(browserId, downloadId);
      expect(res.headers['content-disposition']).toContain('contract.txt');
      expect(await new Response(Readable.toWeb(res.body) as ReadableStream).text()).toBe(
        'contract bytes',
      );
    },
    bad: async () => {
      await expect(client.downloads.get(browserId, 'nope')).rejects.toBeInstanceOf(NotFoundError);
      await pre(client.downloads.get(browserId, ''));
    },
  },
  recordingStart: {
    ok: async () => {
      const { recording_id } = await client.recordings.start(browserId);
      expect(recording_id).toMatch(/^rec_/);
      recordingId = recording_id;
      await new Promise((r) => setTimeout(r, 1000));
    },
    bad: async () => {
      await expect(client.recordings.start('inst_missing')).rejects.toBeInstanceOf(NotFoundError);
      await pre(client.recordings.start(''));
    },
  },
  recordingStop: {
    ok: async () => {
      const clip = await client.recordings.stop(browserId);
      expect(clip).toMatchObject({ id: recordingId, state: 'completed', mime_type: 'video/mp4' });
      expect(clip.size).toBeGreaterThan(0);
    },
    bad: async () => {
      // nothing runs any more: a clear 409
      const err = await client.recordings.stop(browserId).catch((e: unknown) => e);
      expect((err as { status?: number }).status).toBe(409);
    },
  },
  listRecordings: {
    ok: async () => {
      const list = await client.recordings.list(browserId);
      expect(list.map((r) => r.id)).toEqual([recordingId]);
    },
    bad: async () => {
      await expect(client.recordings.list('inst_missing')).rejects.toBeInstanceOf(NotFoundError);
    },
  },
  getRecording: {
    ok: async () => {
      const res = await client.recordings.get(browserId, recordingId);
      expect(res.headers['content-type']).toBe('video/mp4');
      const head = Buffer.from(
        await new Response(Readable.toWeb(res.body) as ReadableStream).arrayBuffer(),
      );
      expect(head.subarray(4, 8).toString()).toBe('ftyp');
    },
    bad: async () => {
      await expect(client.recordings.get(browserId, 'rec_missing')).rejects.toBeInstanceOf(
        NotFoundError,
      );
    },
  },
  // burrow extensions: hand-off to a person, and session time (src/api/session-time.ts)
  handoffCreate: {
    ok: async () => {
      const h = await client.instances.handoff(browserId, {
        message: 'contract',
        timeout_seconds: 60,
      });
      expect(h).toMatchObject({ instance_id: browserId, status: 'pending', message: 'contract' });
      expect(h.url).toContain(`/stream/${browserId}/`);
      handoffId = h.handoff_id;
    },
    bad: async () => {
      await pre(client.instances.handoff(browserId, { message: '' }));
      await raw422(`/v1/instance/${browserId}/handoff`, {
        body: { message: 'x', timeout_seconds: 0 },
      });
      await expect(
        client.instances.handoff('inst_missing', { message: 'x' }),
      ).rejects.toBeInstanceOf(NotFoundError);
    },
  },
  handoffGet: {
    ok: async () => {
      const h = await client.instances.handoffStatus(browserId, handoffId, { wait_seconds: 0 });
      expect(h).toMatchObject({ handoff_id: handoffId, status: 'pending' });
      expect(h.url).toBeUndefined();
    },
    bad: async () => {
      await expect(client.instances.handoffStatus(browserId, 'ho_missing')).rejects.toBeInstanceOf(
        NotFoundError,
      );
      await pre(client.instances.handoffStatus(browserId, handoffId, { wait_seconds: 61 }));
      await raw422(`/v1/instance/${browserId}/handoff/${handoffId}`, {
        method: 'GET',
        query: '?wait_seconds=abc',
      });
    },
  },
  extend: {
    ok: async () => {
      const before = Date.parse((await client.instances.get(browserId)).expires_at!);
      const inst = await client.instances.extend(browserId, { timeout_hours: 3 });
      expect(Date.parse(inst.expires_at!)).toBeGreaterThan(before);
      expect(inst.time_left_seconds).toBeGreaterThan(3 * 3600 - 60);
    },
    bad: async () => {
      await pre(client.instances.extend(browserId, { timeout_hours: 25 }));
      const detail = await raw422(`/v1/instance/${browserId}/extend`, {
        body: { timeout_hours: 48 },
      });
      expect(JSON.stringify(detail)).toContain('24');
      await expect(
        client.instances.extend('inst_missing', { timeout_hours: 1 }),
      ).rejects.toBeInstanceOf(NotFoundError);
    },
  },
  pause: {
    ok: async () => {
      expect((await client.instances.pause(browserId)).status).toBe('paused');
      await expect(client.instance.screenshot(browserId)).rejects.toBeInstanceOf(BadRequestError);
    },
    bad: async () => {
      await expect(client.instances.pause('inst_missing')).rejects.toBeInstanceOf(NotFoundError);
    },
  },
  resume: {
    ok: async () => {
      const inst = await client.instances.resume(browserId, { timeout_hours: 0.5 });
      expect(inst.status).toBe('running');
    },
    bad: async () => {
      await pre(client.instances.resume(browserId, { timeout_hours: 0 }));
      await raw422(`/v1/instance/${browserId}/resume`, { query: '?timeout_hours=100' });
    },
  },
  stop: {
    ok: async () => {
      expect((await client.instances.stop(browserId)).status).toBe('terminated');
      expect((await client.instances.stop(ubuntuId)).status).toBe('terminated');
      expect((await client.instances.get(ubuntuId)).status).toBe('terminated');
    },
    bad: async () => {
      await expect(client.instances.stop('inst_missing')).rejects.toBeInstanceOf(NotFoundError);
    },
  },

  // burrow extensions: auth states in Playwright's format (src/api/auth-states.ts)
  authStateStorageState: {
    ok: async () => {
      const state = await client.authStates.storageState(authStateId);
      expect(Array.isArray(state.cookies) && Array.isArray(state.origins)).toBe(true);
    },
    bad: async () => {
      await expect(client.authStates.storageState('auth_missing')).rejects.toBeInstanceOf(
        NotFoundError,
      );
      await pre(client.authStates.storageState(''));
    },
  },
  authStateImport: {
    ok: async () => {
      const cookies = [{ name: 'c', value: '1', domain: '127.0.0.1', path: '/' }];
      const r = await client.authStates.import({ cookies, origins: [] }, { name: 'contract' });
      expect(r).toEqual({ auth_state_id: expect.any(String), name: 'contract' });
    },
    bad: async () => {
      await pre(client.authStates.import({ cookies: 'no' } as never));
      await raw422('/v1/auth_states/import', { body: { cookies: [{}], origins: [] } });
    },
  },
  authStateDelete: {
    ok: async () => {
      const { auth_state_id } = await client.authStates.import({ cookies: [], origins: [] });
      expect(await client.authStates.delete(auth_state_id)).toEqual({ status: 'success' });
    },
    bad: async () => {
      await expect(client.authStates.delete('auth_missing')).rejects.toBeInstanceOf(NotFoundError);
    },
  },

  // burrow extensions: browser extensions (test/integration/browser/browser-extensions.test.ts loads them)
  extensionUpload: {
    ok: async () => {
      const info = await client.extensions.upload(makeZip(testExtension()));
      expect(info.id).toMatch(/^ext_[0-9a-f]{16}$/);
      expect(info).toMatchObject({ name: 'burrow test extension', filename: 'extension.zip' });
      extensionId = info.id;
    },
    bad: async () => {
      // @ts-expect-error: not a file source
      await pre(client.extensions.upload(42));
      await raw422('/v1/extensions', { body: {} }); // JSON, not multipart: no file
    },
  },
  extensionList: {
    ok: async () => {
      expect((await client.extensions.list()).map((e) => e.id)).toContain(extensionId);
    },
    bad: async () => {
      const anon = new Burrow({ baseUrl: server.url, apiKey: 'wrong-key-000', maxRetries: 0 });
      await expect(anon.extensions.list()).rejects.toBeInstanceOf(AuthenticationError);
      await anon.close();
    },
  },
  extensionDelete: {
    ok: async () => {
      expect(await client.extensions.delete(extensionId)).toEqual({ status: 'success' });
    },
    bad: async () => {
      await expect(client.extensions.delete(extensionId)).rejects.toBeInstanceOf(NotFoundError);
      await pre(client.extensions.delete(''));
    },
  },

  // burrow extensions: persistent profiles (test/integration/browser/browser-profiles.test.ts uses them)
  profileList: {
    ok: async () => {
      const inst = await client.instances.start({
        instance_type: 'browser',
        profile: { name: 'contract', save_changes: true },
      });
      expect((await client.profiles.list()).find((p) => p.name === 'contract')).toBeUndefined();
      await client.instances.stop(inst.id);
      await expect
        .poll(async () => (await client.profiles.list()).find((p) => p.name === 'contract'), {
          timeout: 60_000,
        })
        .toMatchObject({ name: 'contract', in_use_by: null });
    },
    bad: async () => {
      const anon = new Burrow({ baseUrl: server.url, apiKey: 'wrong-key-000', maxRetries: 0 });
      await expect(anon.profiles.list()).rejects.toBeInstanceOf(AuthenticationError);
      await anon.close();
    },
  },
  profileDelete: {
    ok: async () => {
      expect(await client.profiles.delete('contract')).toEqual({ status: 'success' });
    },
    bad: async () => {
      await expect(client.profiles.delete('contract')).rejects.toBeInstanceOf(NotFoundError);
      await pre(client.profiles.delete('../up'));
    },
  },

  // burrow extensions: keys of projects need cluster mode (test/integration/cluster/cluster-keys.test.ts);
  // a single server says so, and still checks what it is sent
  keyCreate: {
    ok: async () => {
      await expect(client.keys.create({ project: 'contract' })).rejects.toMatchObject({
        status: 501,
      });
    },
    bad: async () => {
      await pre(client.keys.create({ project: '../up' }));
      await raw422('/v1/keys', { body: { project: '' } });
    },
  },
  keyList: {
    ok: async () => {
      await expect(client.keys.list()).rejects.toMatchObject({ status: 501 });
    },
    bad: async () => {
      const res = await server.api('/v1/keys', { headers: { 'x-api-key': 'wrong' } });
      expect(res.status).toBe(401);
    },
  },
  keyRevoke: {
    ok: async () => {
      await expect(client.keys.revoke('key_0123456789abcdef')).rejects.toMatchObject({
        status: 501,
      });
    },
    bad: async () => {
      await pre(client.keys.revoke(''));
    },
  },

  // burrow extension: the node itself. A drain ends its server, so it drains a second one
  nodeDrain: {
    ok: async () => {
      const other = await testServer();
      const api = new Burrow({ baseUrl: other.url, apiKey: other.apiKey, maxRetries: 0 });
      try {
        const first = await api.node.drain();
        expect(first.draining).toBe(true);
        expect(Date.parse(first.deadline)).toBeGreaterThan(Date.now());
        // nothing runs there: it closes at once
        await other.drained;
      } finally {
        await api.close();
        await other.close();
      }
    },
    bad: async () => {
      const anon = new Burrow({ baseUrl: server.url, apiKey: 'wrong-key-000', maxRetries: 0 });
      await expect(anon.node.drain()).rejects.toBeInstanceOf(AuthenticationError);
      await anon.close();
    },
  },

  // burrow extensions
  version: {
    ok: async () => {
      const v = await client.meta.version();
      const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8'));
      expect(v.burrow).toBe((pkg as { version: string }).version);
      expect(v.api).toBe('1.0.0');
      // what the binary itself says, asked here separately
      const said = execFileSync('/usr/lib/chromium/chromium', ['--version'], { encoding: 'utf8' });
      expect(v.chromium).toMatch(/^\d+\.\d+\.\d+\.\d+$/);
      expect(said).toContain(v.chromium!);
    },
    bad: async () => {
      const anon = new Burrow({ baseUrl: server.url, apiKey: 'wrong-key-000', maxRetries: 0 });
      await expect(anon.meta.version()).rejects.toBeInstanceOf(AuthenticationError);
      await anon.close();
    },
  },
} satisfies Partial<Record<OperationId, Case>>;
