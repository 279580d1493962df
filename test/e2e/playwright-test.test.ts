/**
 * The Playwright Test example project runs on a remote browser through burrow-sandbox/playwright-test,
 * and a failing test gets the instance's screenshot attached to its report.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
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
function expectNoLeftovers(run: Run & { serverPids: number[] }) {
  expect(pidsMatching(dir)).toEqual([]);
  expect(run.serverPids).toHaveLength(1); // one worker, one embedded server
  expect(instanceProcesses(undefined, run.serverPids[0])).toEqual([]);
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
    expect(run.stdout).toMatch(/3 passed/);
    expect(run.code).toBe(0);
    expectNoLeftovers(run);
  });

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
    const shot = result!.attachments.find((a) => a.name === 'screenshot');
    expect(shot).toMatchObject({ contentType: 'image/png' });
    const png = shot!.path ? readFileSync(shot!.path) : Buffer.from(shot!.body!, 'base64');
    expect(pngSize(png)).toEqual([1024, 768]);
    expectNoLeftovers(run);
  });
});
