/**
 * The browser runtime on its own (no registry): pause and resume, stop, Chromium dying on its
 * own, and a Chromium that cannot start. Clients reach it through a bare node:http server that
 * checks the token and hands upgrades to the runtime, as the real server does.
 */
import { testSandboxHost } from '../../helpers/sandbox.js';
import { randomBytes } from 'node:crypto';
import { chmodSync, mkdtempSync, readdirSync, readlinkSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { createBrowserRuntime } from '../../../src/server/browser/index.js';
import { refuseUpgrade, serverError } from '../../../src/server/errors.js';
import { processState } from '../../../src/internal/process.js';
import type { InstanceRuntime, RuntimeContext } from '../../../src/server/instances/runtime.js';
import {
  eventually,
  instanceChromium,
  instanceFrozen,
  instancePids,
  pidsMatching,
  pngSize,
} from '../../helpers/server.js';

const silent = { info() {}, warn() {}, error() {}, debug() {} };

/** Run `fn` against a started browser runtime, then stop it and remove everything. */
async function withRuntime(
  fn: (t: { runtime: InstanceRuntime; ctx: RuntimeContext; failures: string[] }) => Promise<void>,
  {
    chromiumPath = '/usr/lib/chromium/chromium',
    dir = mkdtempSync(join(tmpdir(), 'burrow-rt-')),
    unisolated = false,
  } = {},
): Promise<void> {
  const token = randomBytes(16).toString('hex');
  const failures: string[] = [];
  let runtime: InstanceRuntime | undefined;
  const http = createServer((_req, res) => res.writeHead(404).end());
  http.on('upgrade', (req, socket, head) => {
    const m = /^\/cdp\/inst_rt_\w+\/([^?]*)\?token=(\w+)$/.exec(req.url ?? '');
    if (!m || m[2] !== token || !runtime?.upgrade)
      return refuseUpgrade(socket, serverError('token_invalid', { kind: 'CDP' }));
    runtime.upgrade('cdp', m[1]!, req, socket, head);
  });
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
  const ctx: RuntimeContext = {
    instance: {
      id: `inst_rt_${randomBytes(4).toString('hex')}`,
      type: 'browser',
      dir,
      token,
    },
    plan: { resolution: [800, 600], blockedDomains: [], pooled: false, extensions: [] },
    services: {
      publicUrl: `http://127.0.0.1:${(http.address() as AddressInfo).port}`,
      log: silent,
      chromiumPath,
      maxUploadBytes: 1024,
      failed: (reason) => failures.push(reason),
      sandboxHost: await testSandboxHost(
        join(dir, `run-${process.pid}-${randomBytes(4).toString('hex')}`),
        {
          disableIsolation: unisolated,
        },
      ),
    },
  };
  try {
    runtime = await createBrowserRuntime(ctx);
    await runtime.start();
    await fn({ runtime, ctx, failures });
  } finally {
    await runtime?.stop();
    http.closeAllConnections();
    http.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Entries of the system temp dir that link into `dir`. */
const tmpLinks = (dir: string) =>
  readdirSync(tmpdir()).filter((name) => {
    try {
      return readlinkSync(join(tmpdir(), name)).startsWith(`${dir}/`);
    } catch {
      return false;
    }
  });

describe('browser runtime', () => {
  it('pause freezes every Chromium process and keeps the page; resume thaws it', async () => {
    await withRuntime(async ({ runtime, ctx }) => {
      const browser = await chromium.connectOverCDP(runtime.browser!.cdpUrl());
      const page = browser.contexts()[0]!.pages()[0]!;
      await page.setContent('<title>kept</title><p id="n">1</p>');

      await runtime.pause();
      const pids = instancePids(ctx.instance.id);
      expect(pids.length).toBeGreaterThan(3);
      expect(instanceFrozen(ctx.instance.id)).toBe(true);
      expect(pids.map(processState).filter((s) => !['D', 'T', ''].includes(s))).toEqual([]);

      await runtime.resume();
      expect(instanceFrozen(ctx.instance.id)).toBe(false);
      expect(instancePids(ctx.instance.id).map(processState)).not.toContain('T');
      expect(await page.title()).toBe('kept');
      expect(await page.evaluate(() => (document.getElementById('n')!.textContent = '2'))).toBe(
        '2',
      );
      expect(pngSize(await runtime.computer!.screenshot())).toEqual([800, 600]);
      await browser.close();
    });
  });

  it('stop leaves no process and no temp link behind, and is idempotent', async () => {
    await withRuntime(async ({ runtime, ctx, failures }) => {
      expect(instancePids(ctx.instance.id).length).toBeGreaterThan(0);
      await Promise.all([runtime.stop(), runtime.stop()]);
      expect(instancePids(ctx.instance.id)).toEqual([]);
      expect(tmpLinks(ctx.instance.dir)).toEqual([]);
      await expect(runtime.browser!.start()).rejects.toMatchObject({ status: 400 });
      expect(failures).toEqual([]);
    });
  });

  it('Chromium killed from outside reports failed() and leaves nothing', async () => {
    await withRuntime(async ({ runtime, ctx, failures }) => {
      const main = instanceChromium(ctx.instance.id);
      process.kill(main!, 'SIGKILL');
      await eventually(() => failures.length > 0, 'failed() to be called');
      // (inside the sandbox, bubblewrap reports a killed command as status 128 + 9)
      expect(failures).toEqual([
        expect.stringMatching(/^Chromium exited unexpectedly \((SIGKILL|code 137)\)$/),
      ]);
      await runtime.stop();
      await eventually(() => instancePids(ctx.instance.id).length === 0, 'no process left');
      expect(() => runtime.browser!.cdpUrl()).toThrow(/not running/);
    });
  });

  it('applies and captures storage per origin, offline, keeping http and https apart', async () => {
    await withRuntime(async ({ runtime }) => {
      const browser = runtime.browser!;
      const cookie = { name: 'c', value: 'v', domain: 'example.com', path: '/', secure: true };
      await browser.applyAuth({
        cookies: [cookie],
        localStorage: {
          'http://example.com': { scheme: 'http' },
          'https://example.com': { scheme: 'https' },
          'http://example.com:8080': { port: '8080' },
        },
        sessionStorage: {},
      });
      const captured = await browser.captureAuth(8 * 2 ** 20);
      expect(captured.localStorage).toEqual({
        'http://example.com': { scheme: 'http' },
        'https://example.com': { scheme: 'https' },
        'http://example.com:8080': { port: '8080' },
      });
      expect(captured.cookies).toEqual([expect.objectContaining(cookie)]);
      expect(await browser.currentUrl()).toBe('about:blank'); // the user's tab never moved
    });
  });

  it('a Chromium that cannot start rejects start() with its stderr and leaves nothing', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'burrow-rt-'));
    const fake = join(dir, 'fake-chromium');
    writeFileSync(fake, '#!/bin/sh\necho "cannot open display: nowhere" >&2\nexit 3\n');
    chmodSync(fake, 0o755);
    let ran = false;
    await expect(
      withRuntime(
        async () => {
          ran = true;
        },
        // unisolated: the fake binary lives in a host directory the sandbox does not show
        { chromiumPath: fake, dir, unisolated: true },
      ),
    ).rejects.toThrow(
      /Chromium exited \(code 3\); last stderr lines:\ncannot open display: nowhere/,
    );
    expect(ran).toBe(false);
    expect(tmpLinks(dir)).toEqual([]);
    expect(pidsMatching(fake)).toEqual([]);
  });
});
