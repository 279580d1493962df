/**
 * A script never ends while its session is open and the browser can still deliver events (issue
 * 20 item 1). Real scripts, written to a temp project that has the package built as plain
 * JavaScript, run with `node script.mjs` against the real server this file starts; each waits
 * for every kind of page event with no driver call pending (console, dialog, popup, request,
 * download, `page.waitForEvent`, Puppeteer's `page.on` and `waitForRequest`), for playwright-core
 * and puppeteer-core, in the `await main()` and `main().then()` styles: exit 0, every event line,
 * the `finally` that stops ran, the instance is stopped. The same scripts on a local
 * `launch()` of the same Chromium print the same lines, and a local script that forgets
 * `browser.close()` stays up, the baseline for a forgotten `stop()`. One script per driver and
 * style waits for all kinds in turn, which bounds the Chromium starts to seven.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Instance } from 'burrow-sandbox';
import { eventually, type TestServer } from '../helpers/server.js';
import { builtProject, type BuiltProject } from './fixtures/built-package.js';
import {
  CHROMIUM,
  EXPECTED,
  eventScript,
  type Driver,
  type Style,
  type Target,
} from './fixtures/event-scripts.js';
import { sessionServer } from './fixtures/session-server.js';
import type { Run } from './run.js';

const env = sessionServer('bev-');
let server: TestServer;
let project: BuiltProject;
let site: Server;
let siteUrl: string;

beforeAll(async () => {
  server = env.server;
  project = await builtProject('bev-pkg-');
  site = createServer((req, res) => {
    if (req.url === '/file.txt') {
      res.writeHead(200, {
        'content-type': 'text/plain',
        'content-disposition': 'attachment; filename="file.txt"',
      });
      res.end('burrow download');
    } else if (req.url?.startsWith('/ping')) {
      res.writeHead(204).end();
    } else {
      res.writeHead(200, { 'content-type': 'text/html' });
      res.end('<a id="dl" href="/file.txt" download>file</a>');
    }
  });
  await new Promise<void>((r) => site.listen(0, '127.0.0.1', r));
  siteUrl = `http://127.0.0.1:${(site.address() as AddressInfo).port}/`;
}, 120_000);

afterAll(async () => {
  await new Promise((r) => site?.close(r));
  project?.remove();
});

/** Writes the script and runs it with `node`; a run that outlasts `ms` is killed and fails. */
async function runScript(driver: Driver, style: Style, target: Target, ms = 150_000) {
  const file = join(project.dir, `${driver}-${style}-${target}.mjs`);
  writeFileSync(file, eventScript(driver, style, target));
  const child = spawn(process.execPath, [file], {
    cwd: project.dir,
    env: {
      ...process.env,
      SITE: siteUrl,
      BURROW_BASE_URL: server.url,
      BURROW_API_KEY: server.apiKey,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += String(d)));
  child.stderr.on('data', (d: Buffer) => (stderr += String(d)));
  const timer = setTimeout(() => child.kill('SIGKILL'), ms);
  try {
    return await new Promise<Run>((done, fail) => {
      child.on('error', fail);
      child.on('close', (code, signal) => done({ code, signal, stdout, stderr }));
    });
  } finally {
    clearTimeout(timer);
  }
}

const status = async (id: string) =>
  ((await (await server.api(`/v1/instance/${id}`)).json()) as Instance).status;

describe.each(['playwright', 'puppeteer'] as const)('%s on a session', (driver) => {
  it.each(['await', 'then'] as const)(
    'main() in the %s style sees every event, runs its finally, exits 0',
    async (style) => {
      const run = await runScript(driver, style, 'session');
      const [first, ...rest] = run.stdout.trim().split('\n');
      expect(run, run.stderr).toMatchObject({ code: 0, signal: null });
      expect(rest).toEqual(EXPECTED[driver]);
      expect(run.stderr).not.toContain('burrow:'); // no notice: the script was never idle for long
      const id = /^session (inst_\w+)$/.exec(first ?? '')?.[1];
      expect(id, first).toBeDefined();
      expect(await status(id!)).toBe('terminated');
    },
    180_000,
  );
});

describe.each(['playwright', 'puppeteer'] as const)('%s on a local launch()', (driver) => {
  it('the same script prints the same lines', async () => {
    const run = await runScript(driver, 'await', 'local');
    expect(run, run.stderr).toMatchObject({ code: 0, signal: null });
    expect(run.stdout.trim().split('\n')).toEqual(EXPECTED[driver]);
  }, 180_000);
});

describe('the baseline for a forgotten stop()', () => {
  it('a local Playwright script that forgets browser.close() stays up too (as script-exit.test.ts expects of a session)', async () => {
    const file = join(project.dir, 'local-forget.mjs');
    writeFileSync(
      file,
      `import { chromium } from 'playwright-core';
const browser = await chromium.launch({ executablePath: '${CHROMIUM}' });
const page = await browser.newPage();
await page.goto('data:text/html,<title>x</title>');
console.log('done, close() forgotten');
`,
    );
    const child = spawn(process.execPath, [file], { cwd: project.dir, stdio: 'pipe' });
    let stdout = '';
    child.stdout.on('data', (d: Buffer) => (stdout += String(d)));
    const exited = once(child, 'exit');
    try {
      await eventually(() => stdout.includes('done'), 'the script to finish its work', 60_000);
      await new Promise((r) => setTimeout(r, 5000));
      expect(child.exitCode).toBeNull();
    } finally {
      child.kill('SIGINT');
      await exited;
    }
  }, 120_000);
});
