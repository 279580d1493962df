/**
 * The desktop browser of an ubuntu instance runs inside the instance's sandbox: through the real
 * HTTP server, a page reads files of the instance's home over file:// but not the host files the
 * sandbox hides (the data dir), its profile is in the instance's home, pause stops it, and it
 * leaves nothing running after browser/stop and stop.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { processState } from '../../../src/internal/process.js';
import { alive, commName, processTree } from '../../helpers/computer.js';
import {
  eventually,
  instanceFrozen,
  instancePids,
  instanceProcesses,
  pidsMatching,
  testServer,
  type TestServer,
} from '../../helpers/server.js';

let server: TestServer;
let id: string;
let browser: Browser | undefined;
let dataDir: string;

/**
 * Processes of the instance: its cgroup's members, the host-side wrappers that name it, and
 * everything below them.
 */
const instanceTree = () => processTree(instancePids(id));
const chromiumPids = () => instanceTree().filter((p) => commName(p).startsWith('chrom'));

async function bash(command: string): Promise<{ output?: string; error?: string }> {
  const res = await server.api(`/v1/instance/${id}/bash`, { json: { command } });
  expect(res.status).toBe(200);
  return (await res.json()) as { output?: string; error?: string };
}

/** The text of a fresh tab after navigating to `url`; a failed navigation gives `''`. */
async function textAt(url: string): Promise<string> {
  const tab = await browser!.contexts()[0]!.newPage();
  try {
    await tab.goto(url, { timeout: 10_000 });
    return await tab.evaluate(() => document.body?.innerText ?? '');
  } catch {
    return '';
  } finally {
    await tab.close();
  }
}

beforeAll(async () => {
  // outside /tmp (the sandbox has its own /tmp): only the data-dir mask may hide it
  dataDir = mkdtempSync('/var/tmp/burrow-sandbox-test-');
  server = await testServer({ dataDir });
  const res = await server.api('/v1/start', {
    json: { instance_type: 'ubuntu', resolution: [1024, 768] },
  });
  expect(res.status).toBe(200);
  id = ((await res.json()) as { id: string }).id;
});
afterAll(async () => {
  await browser?.close().catch(() => {});
  await server?.close();
  expect(pidsMatching(dataDir)).toEqual([]);
  expect(instanceProcesses()).toEqual([]);
  rmSync(dataDir, { recursive: true, force: true });
});

describe('the ubuntu desktop browser runs in the sandbox', () => {
  it('browser/start gives a cdp_url that playwright connects to', async () => {
    const res = await server.api(`/v1/instance/${id}/browser/start`, { method: 'POST' });
    expect(res.status).toBe(200);
    const { cdp_url } = (await res.json()) as { cdp_url: string };
    browser = await chromium.connectOverCDP(cdp_url);
    expect(browser.contexts()).toHaveLength(1);
    expect(chromiumPids().length).toBeGreaterThan(0);
  });

  it('file:// shows files of the instance home but not host files the sandbox hides', async () => {
    const marker = `host-secret-${Date.now()}`;
    mkdirSync(join(dataDir, 'auth-states'), { recursive: true });
    writeFileSync(join(dataDir, 'auth-states', 'marker.html'), `<p>${marker}</p>`);
    // the host itself reads it (the check below is not vacuous) …
    expect(readFileSync(join(dataDir, 'auth-states', 'marker.html'), 'utf8')).toContain(marker);
    // … the sandboxed browser does not
    expect(await textAt(`file://${dataDir}/auth-states/marker.html`)).not.toContain(marker);
    expect(await textAt(`file://${dataDir}/auth-states/`)).not.toContain('marker.html');
    expect(await textAt('file:///root/')).not.toContain('.bashrc');

    const mine = `mine-${Date.now()}`;
    expect((await bash(`echo '<p>${mine}</p>' > /home/user/x.html`)).error ?? '').toBe('');
    expect(await textAt('file:///home/user/x.html')).toContain(mine);
  });

  it('the profile lives in the instance home, where the instance tools see it', async () => {
    const out = await bash('ls /home/user/.config/burrow-chromium/profile');
    expect(out.output).toContain('Default');
  });

  it('pause stops the browser, resume continues it', async () => {
    const pause = await server.api(`/v1/instance/${id}/pause`, { method: 'POST' });
    expect(pause.status).toBe(200);
    const stateOf = (pid: number) => processState(pid) || 'gone';
    // pause freezes the instance's cgroup (not SIGSTOP any more): frozen tasks sleep
    // uninterruptibly, so they show D, not T. A process that exited just before (the renderer of
    // the tab the last test closed) stays a zombie (Z) while its parent is frozen: it runs nothing.
    expect(instanceFrozen(id)).toBe(true);
    const pids = chromiumPids();
    expect(pids.length).toBeGreaterThan(0);
    const states = pids.map((p) => `${p}:${stateOf(p)}`);
    expect(
      states.filter((s) => !/:(D|Z|gone)$/.test(s)),
      states.join(' '),
    ).toEqual([]);
    expect(states.filter((s) => s.endsWith(':D')).length, states.join(' ')).toBeGreaterThan(0);
    const resume = await server.api(`/v1/instance/${id}/resume`, { method: 'POST' });
    expect(resume.status).toBe(200);
    expect(instanceFrozen(id)).toBe(false);
    expect(await textAt('file:///home/user/x.html')).toContain('mine-');
  });

  it('browser/stop and stop leave no Chromium', async () => {
    await browser?.close().catch(() => {});
    browser = undefined;
    const tree = instanceTree();
    const bstop = await server.api(`/v1/instance/${id}/browser/stop`, { method: 'POST' });
    expect(bstop.status).toBe(200);
    await eventually(() => chromiumPids().length === 0, 'the desktop browser to exit');
    await eventually(
      () => tree.filter((p) => commName(p).startsWith('chrom')).every((p) => !alive(p)),
      'every Chromium process (crashpad included) to exit',
    );
    // a second start works on the same profile
    const again = await server.api(`/v1/instance/${id}/browser/start`, { method: 'POST' });
    expect(again.status).toBe(200);
    const all = instanceTree();
    const stop = await server.api(`/v1/instance/${id}/stop`, { method: 'POST' });
    expect(stop.status).toBe(200);
    await eventually(() => all.every((p) => !alive(p)), 'every process of the instance to exit');
    // the stop answers at once and tears down in the background: nothing of it may remain
    await eventually(() => instancePids(id).length === 0, 'no process of the instance left');
  });
});
