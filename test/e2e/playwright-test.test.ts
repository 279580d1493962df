/**
 * Playwright Test projects on remote browsers through burrow-sandbox/playwright-test: the example
 * project, and test/e2e/fixtures/pt-project, whose tests check that each gets a fresh context
 * built from its `use` options, and whose failing tests' reports carry exactly one screenshot, the
 * video (or the note why there is none), and no live-view URL (the instance is stopped by the time
 * anyone reads the report: Playwright Test replaces the worker after a failure).
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { devices } from '@playwright/test';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { instanceProcesses, pidsMatching, pngSize } from '../helpers/server.js';
import { nodeEmbedded, type Run } from './run.js';

const dir = mkdtempSync(join(tmpdir(), 'bpt-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const cli = 'node_modules/@playwright/test/cli.js';

interface Attachment {
  name: string;
  contentType: string;
  path?: string;
  body?: string;
}
interface JsonSuite {
  specs?: {
    title: string;
    tests: { results: { status: string; attachments: Attachment[] }[] }[];
  }[];
  suites?: JsonSuite[];
}

/**
 * Nothing of the run is left: no process naming its dir, and (the sandboxed Chromium names neither
 * the dir nor its instance) nothing in the cgroups of the worker's embedded server.
 */
function expectNoLeftovers(run: Run & { serverPids: number[] }, workers = 1) {
  expect(pidsMatching(dir)).toEqual([]);
  expect(run.serverPids).toHaveLength(workers); // each worker process, its embedded server
  for (const pid of run.serverPids) expect(instanceProcesses(undefined, pid)).toEqual([]);
}

const results = (
  suite: JsonSuite,
): { title: string; status: string; attachments: Attachment[] }[] => [
  ...(suite.specs ?? []).flatMap((s) =>
    s.tests.flatMap((t) => t.results.map((r) => ({ title: s.title, ...r }))),
  ),
  ...(suite.suites ?? []).flatMap(results),
];

describe('examples/playwright-test', () => {
  it('passes with the remote browser', async () => {
    const run = await nodeEmbedded(
      [
        '--no-warnings',
        cli,
        'test',
        '-c',
        'examples/playwright-test',
        '--output',
        join(dir, 'out1'),
      ],
      join(dir, 'data'),
    );
    expect(run.stdout).toMatch(/4 passed/);
    expect(run.code).toBe(0);
    expectNoLeftovers(run);
  }, 180_000); // a Playwright Test run: its CLI, a worker, its embedded server and instance

  it('a deliberately failing spec gets the screenshot attached', async () => {
    const report = join(dir, 'report.json');
    const run = await nodeEmbedded(
      [
        cli,
        'test',
        '-c',
        'examples/playwright-test',
        '--reporter=json',
        '--output',
        join(dir, 'out2'),
      ],
      join(dir, 'data'),
      { BURROW_FAILURE_DEMO: '1', PLAYWRIGHT_JSON_OUTPUT_NAME: report },
    );
    expect(run.code).toBe(1);
    const suites = (JSON.parse(readFileSync(report, 'utf8')) as { suites: JsonSuite[] }).suites;
    const [result, ...others] = suites.flatMap(results);
    expect(others).toEqual([]);
    expect(result).toMatchObject({
      title: 'a failing test gets a screenshot attached',
      status: 'failed',
    });
    const shots = result!.attachments.filter((a) => a.name === 'screenshot');
    expect(shots).toHaveLength(1);
    expect(shots[0]).toMatchObject({ contentType: 'image/png' });
    // the test's own page, in a fresh context of Playwright Test's default viewport
    expect(pngSize(attachmentBytes(shots[0]!))).toEqual([1280, 720]);
    // the worker's instance stops with the worker Playwright Test replaces after a failure
    expect(result!.attachments.map((a) => a.name)).not.toContain('live view');
    expectNoLeftovers(run);
  }, 180_000);
});

const attachmentBytes = (a: Attachment): Buffer =>
  a.path ? readFileSync(a.path) : Buffer.from(a.body!, 'base64');

describe('test/e2e/fixtures/pt-project', () => {
  let site: Server;
  let origin: string;
  beforeAll(async () => {
    site = createServer((req, res) => {
      const headers = JSON.stringify(req.headers);
      if (req.url === '/headers') {
        res.writeHead(200, { 'content-type': 'application/json' }).end(headers);
        return;
      }
      const seen = JSON.stringify({ cookie: req.headers.cookie ?? '', headers: req.headers });
      res
        .writeHead(200, { 'content-type': 'text/html; charset=utf-8' })
        .end(
          `<!doctype html><title>${req.url}</title><pre id="seen">${seen.replace(/</g, '&lt;')}</pre>` +
            `<span id="js">off</span><script>document.getElementById('js').textContent = 'on'</script>`,
        );
    });
    await new Promise<void>((resolve) => site.listen(0, '127.0.0.1', resolve));
    origin = `http://127.0.0.1:${(site.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    site.closeAllConnections();
    await new Promise((resolve) => site.close(resolve));
  });

  const project = (out: string, env: Record<string, string> = {}, args: string[] = []) =>
    nodeEmbedded(
      [cli, 'test', '-c', 'test/e2e/fixtures/pt-project', '--output', join(dir, out), ...args],
      join(dir, 'data'),
      { BURROW_PT_SITE: origin, ...env },
    );

  it('gives each test a fresh context built from its use options and authState', async () => {
    const run = await project('pt1');
    expect(run.stdout).toMatch(/16 passed/);
    expect(run.stdout).not.toMatch(/failed|flaky|skipped/);
    expect(run.code).toBe(0);
    // a worker each: the setup project, and the files with worker options of their own
    // (authState, instancePerTest) next to the rest
    expectNoLeftovers(run, 4);
  }, 180_000); // a whole Playwright Test project, several workers

  it('reports failures with one screenshot, the video or a note, and no dead live-view URL', async () => {
    const report = join(dir, 'pt-report.json');
    const run = await project('pt2', { BURROW_PT_FAIL: '1', PLAYWRIGHT_JSON_OUTPUT_NAME: report }, [
      '--reporter=json',
    ]);
    expect(run.code).toBe(1);
    const suites = (JSON.parse(readFileSync(report, 'utf8')) as { suites: JsonSuite[] }).suites;
    const all = suites.flatMap(results);
    const byTitle = (title: string) => {
      const found = all.filter((r) => r.title === title);
      expect(found, title).toHaveLength(1);
      expect(found[0]!.status, title).toBe('failed');
      return found[0]!;
    };
    const named = (r: { attachments: Attachment[] }, name: string) =>
      r.attachments.filter((a) => a.name === name);

    const fresh = byTitle('fails in a fresh context');
    expect(named(fresh, 'screenshot')).toHaveLength(1);
    // the test's own page, at the phone's viewport and pixel ratio (devices['Pixel 5'])
    const phone = devices['Pixel 5'];
    const [shotW, shotH] = pngSize(attachmentBytes(named(fresh, 'screenshot')[0]!));
    expect(Math.abs(shotW - phone.viewport.width * phone.deviceScaleFactor)).toBeLessThan(2);
    expect(Math.abs(shotH - phone.viewport.height * phone.deviceScaleFactor)).toBeLessThan(2);
    expect(named(fresh, 'live view')).toEqual([]);
    // the clip films the fresh context's page (its green body), not the idle default tab
    const freshVideo = named(fresh, 'video');
    expect(freshVideo).toHaveLength(1);
    expect(freshVideo[0]!.contentType).toBe('video/mp4');
    const [r, g, b] = centrePixel(attachmentBytes(freshVideo[0]!), [1024, 768]);
    expect(g).toBeGreaterThan(120);
    expect(r).toBeLessThan(60);
    expect(b).toBeLessThan(60);

    const shared = byTitle('fails in the default context');
    expect(named(shared, 'screenshot')).toHaveLength(1);
    expect(pngSize(attachmentBytes(named(shared, 'screenshot')[0]!))).toEqual([1024, 768]);
    // its instance (the worker's) was stopped right after: Playwright Test replaced the worker
    expect(named(shared, 'live view')).toEqual([]);
    const video = named(shared, 'video');
    expect(video).toHaveLength(1);
    expect(video[0]!.contentType).toBe('video/mp4');
    const mp4 = attachmentBytes(video[0]!);
    expect(mp4.subarray(4, 8).toString('latin1')).toBe('ftyp');

    const errorOf = (title: string) => JSON.stringify(all.find((r) => r.title === title) ?? {});
    byTitle('fails naming the proxy');
    expect(errorOf('fails naming the proxy')).toMatch(/status 400: proxy http:\/\/127\.0\.0\.1:9 /);
    byTitle('fails naming the option');
    expect(errorOf('fails naming the option')).toMatch(/option \\"locale\\" is not supported/);
    expectNoLeftovers(run, 4); // Playwright Test starts a new worker after each failed test
  }, 180_000); // a whole Playwright Test project, several workers

  it('--headed shows the live view of each session instead of failing the tests', async () => {
    const run = await project('pt3', { BURROW_OPEN_LIVE_VIEW: '0' }, [
      '--headed',
      '--no-deps',
      '--project=main',
      'instance.spec.ts',
    ]);
    expect(run.stdout).toMatch(/2 passed/);
    expect(run.code).toBe(0);
    const lines = `${run.stdout}\n${run.stderr}`.match(
      /burrow: --headed: the browser runs on instance inst_\w+; watch it at its live view: http:\/\/127\.0\.0\.1:\d+\/stream\/inst_\w+\/\?token=\S+/g,
    );
    expect(new Set(lines)).toHaveProperty('size', 2); // instancePerTest: one instance per test
    expectNoLeftovers(run);
  }, 180_000); // a whole Playwright Test project, several workers
});

/** RGB of the centre pixel of a clip's last frame, decoded by the host's ffmpeg. */
function centrePixel(mp4: Buffer, [w, h]: [number, number]): [number, number, number] {
  const file = join(dir, `clip-${Date.now()}.mp4`);
  writeFileSync(file, mp4);
  const raw = execFileSync(
    'ffmpeg',
    [
      '-v',
      'error',
      '-sseof',
      '-0.5',
      '-i',
      file,
      '-frames:v',
      '1',
      '-f',
      'rawvideo',
      '-pix_fmt',
      'rgb24',
      '-',
    ],
    { maxBuffer: 64 * 1024 * 1024 },
  );
  expect(raw.length).toBe(w * h * 3);
  const at = (Math.floor(h / 2) * w + Math.floor(w / 2)) * 3;
  return [raw[at]!, raw[at + 1]!, raw[at + 2]!];
}
