/**
 * The fresh profile's skeleton in every sandbox made ahead (src/server/chromium/profile-template.ts):
 * each stocked sandbox holds the same stores, the instance's user's, and nothing Chromium keeps
 * per run (preferences, sessions, GPU caches, logs); an instance's Chromium opens them instead of
 * creating them; and what an instance does to its copy (writes, a planted file, a link to a host
 * file) reaches no other instance: the skeleton the next sandboxes get is byte for byte the one
 * made before any instance ran.
 */
import { createHash } from 'node:crypto';
import { existsSync, lstatSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  eventually,
  instanceDisk,
  instancePids,
  instanceProcesses,
  startBrowser,
  testServer,
} from '../../helpers/server.js';
import { useServer } from '../../helpers/use-server.js';
import { startSite, type TestSite } from '../../helpers/site.js';

const PROFILE = '.config/burrow-chromium/profile';

let site: TestSite;

beforeAll(async () => {
  site = await startSite();
});

afterAll(async () => {
  await site?.close();
  expect(instanceProcesses()).toEqual([]);
});
const server = useServer({ sandboxStock: 2 });

interface Entry {
  kind: 'file' | 'dir' | 'other';
  uid: number;
  mode: number;
  sha?: string;
}

/** Every path under instance `id`'s profile directory, read on the host. */
function profileOf(id: string): Map<string, Entry> {
  const root = join(instanceDisk(id).home, PROFILE);
  const out = new Map<string, Entry>();
  const walk = (dir: string, prefix: string) => {
    for (const name of readdirSync(dir)) {
      const path = join(dir, name);
      const rel = prefix ? `${prefix}/${name}` : name;
      const st = lstatSync(path);
      const base = { uid: st.uid, mode: st.mode & 0o777 };
      if (st.isDirectory()) {
        out.set(rel, { kind: 'dir', ...base });
        walk(path, rel);
      } else if (st.isFile()) {
        const sha = createHash('sha256').update(readFileSync(path)).digest('hex');
        out.set(rel, { kind: 'file', ...base, sha });
      } else {
        out.set(rel, { kind: 'other', ...base });
      }
    }
  };
  walk(root, '');
  return out;
}

/** Path → content hash of the files of a profile. */
const hashes = (p: Map<string, Entry>) =>
  Object.fromEntries([...p].filter(([, e]) => e.kind === 'file').map(([k, e]) => [k, e.sha]));

async function bash(id: string, command: string): Promise<string> {
  const res = await server.api(`/v1/instance/${id}/bash`, { json: { command, timeout: 30 } });
  expect(res.status, await res.clone().text()).toBe(200);
  const body = (await res.json()) as { output?: string; error?: string };
  return `${body.output ?? ''}${body.error ?? ''}`;
}

const stop = (id: string) => server.api(`/v1/instance/${id}/stop`, { method: 'POST' });

describe('the profile skeleton in sandboxes made ahead', () => {
  let skeleton: Record<string, string | undefined>;

  it('each holds the same stores, the instance user’s, and nothing Chromium keeps per run', async () => {
    await server.sandboxStock.ready();
    const ids = server.sandboxStock.ids();
    expect(ids).toHaveLength(2);
    const [a, b] = ids.map(profileOf) as [Map<string, Entry>, Map<string, Entry>];
    const paths = [...a.keys()];
    // the stores a fresh Chromium makes in its first second
    for (const store of ['Default/Cookies', 'Default/History', 'Default/Web Data']) {
      expect(a.get(store)?.kind).toBe('file');
    }
    expect(paths.some((p) => p.startsWith('Default/Local Storage/leveldb/'))).toBe(true);
    // only under Default/, and nothing of a run's own
    expect(paths.filter((p) => p !== 'Default' && !p.startsWith('Default/'))).toEqual([]);
    const perRun =
      /(^|\/)(Preferences|Secure Preferences|Local State|Sessions|Session Storage|LOG|LOCK|Cache|GPUCache|Dawn\w*|Singleton\w*)(\/|$)|-journal$/;
    expect(paths.filter((p) => perRun.test(p))).toEqual([]);
    // the instance's user's (the one its home belongs to), files 0600, directories 0700
    const owner = lstatSync(instanceDisk(ids[0]!).home).uid;
    expect(owner).not.toBe(0);
    const entries = [...a.values()];
    expect(entries.filter((e) => e.kind === 'other')).toEqual([]);
    expect(new Set(entries.map((e) => e.uid))).toEqual(new Set([owner]));
    expect(new Set(entries.map((e) => `${e.kind} ${e.mode.toString(8)}`))).toEqual(
      new Set(['file 600', 'dir 700']),
    );
    // the same skeleton in both
    skeleton = hashes(a);
    expect(hashes(b)).toEqual(skeleton);
  });

  it('an instance’s Chromium opens the stores instead of creating them, and they work', async () => {
    await server.sandboxStock.ready();
    const stocked = server.sandboxStock.ids();
    const { id, cdpUrl } = await startBrowser(server);
    expect(stocked).toContain(id);
    const browser = await chromium.connectOverCDP(cdpUrl);
    try {
      const page = browser.contexts()[0]!.pages()[0]!;
      await page.goto(`${site.origin}/`);
      await page.evaluate(() => {
        document.cookie = 'kept=yes; max-age=3600';
        localStorage.setItem('kept', 'yes');
      });
      await page.reload();
      expect(await page.evaluate(() => [document.cookie, localStorage.getItem('kept')])).toEqual([
        'kept=yes',
        'yes',
      ]);
    } finally {
      await browser.close();
    }
    // LevelDB logs each open: a store it found says so, one it made says it was missing (session
    // storage is made anew at every start that restores no session, and is not in the skeleton)
    const logs = [...profileOf(id).keys()].filter(
      (p) => p.endsWith('/LOG') && !p.startsWith('Default/Session Storage/'),
    );
    expect(logs.length).toBeGreaterThan(3);
    const root = join(instanceDisk(id).home, PROFILE);
    const created = logs.filter((p) =>
      readFileSync(join(root, p), 'utf8').includes('since it was missing'),
    );
    expect(created).toEqual([]);
    await stop(id);
    await eventually(() => instancePids(id).length === 0, 'the instance’s processes to end');
  });

  it('what instances do to their copies reaches no sandbox made after them', async () => {
    expect(skeleton).toBeDefined();
    await server.sandboxStock.ready();
    const before = server.sandboxStock.ids();
    // both sandboxes of the stock taken, each by an instance that attacks its copy
    const ids = await Promise.all(
      before.map(async () => {
        const res = await server.api('/v1/start', { json: { instance_type: 'ubuntu' } });
        expect(res.status, await res.clone().text()).toBe(200);
        return ((await res.json()) as { id: string }).id;
      }),
    );
    expect(ids.sort()).toEqual([...before].sort());
    for (const id of ids) {
      // the copy as the instance's processes find it: rewrite a store, plant a file, and link a
      // store to a file of the machine's
      const out = await bash(
        id,
        [
          `cd ~/${PROFILE}/Default`,
          'test -f Cookies && echo has-cookies',
          'printf planted > Cookies',
          'printf planted > planted',
          'rm -f History && ln -s /etc/shadow History',
          'echo done',
        ].join(' && '),
      );
      expect(out).toContain('has-cookies');
      expect(out).toContain('done');
    }
    // the stock refills after the starts, with sandboxes made after the attacks
    await eventually(() => server.sandboxStock.ids().length === 2, 'the stock to refill');
    await server.sandboxStock.ready();
    const fresh = server.sandboxStock.ids();
    expect(fresh.filter((x) => before.includes(x))).toEqual([]);
    for (const other of fresh) {
      const profile = profileOf(other);
      expect(profile.has('Default/planted')).toBe(false);
      expect(profile.get('Default/History')?.kind).toBe('file');
      expect(hashes(profile)).toEqual(skeleton);
    }
    await Promise.all(ids.map(stop));
    await eventually(
      () => ids.every((id) => instancePids(id).length === 0),
      'the instances’ processes to end',
    );
  });
});

describe('a server closed while its template is being made', () => {
  it('stops that Chromium and its sandbox with it, leaving nothing', async () => {
    const other = await testServer({ sandboxStock: 1 });
    let closed = false;
    try {
      // the template's Chromium, in a sandbox of this test process's servers that the stock does
      // not list
      const chromiumOfTemplate = () =>
        instanceProcesses().filter((pid) => {
          try {
            const argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
            return (
              argv[0] === '/usr/lib/chromium/chromium' && !argv.some((a) => a.startsWith('--type='))
            );
          } catch {
            return false;
          }
        });
      await eventually(() => chromiumOfTemplate().length > 0, 'the template’s Chromium to run');
      const running = chromiumOfTemplate();
      await other.close();
      closed = true;
      expect(running.filter((pid) => existsSync(`/proc/${pid}`))).toEqual([]);
      // nothing of that server's sandboxes is left (this file's other server has only its stock)
      expect(
        readdirSync('/var/lib/burrow/sandboxes').filter((r) => r.startsWith(`run-${process.pid}-`))
          .length,
      ).toBe(1);
    } finally {
      if (!closed) await other.close();
    }
  });
});
