/**
 * Every example runs, as a user would run it (`node --import tsx examples/<name>.ts`), against
 * the embedded server, and prints what it promises; none leaves a Chromium behind.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { instanceProcesses, pidsMatching } from '../helpers/server.js';
import { nodeEmbedded } from './run.js';

const dataDir = mkdtempSync(join(tmpdir(), 'bx-'));
afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

async function example(name: string) {
  const run = await nodeEmbedded(['--import', 'tsx', `examples/${name}.ts`], dataDir);
  expect(run.stderr).not.toMatch(/Error/);
  expect(run.code).toBe(0);
  expect(pidsMatching(dataDir)).toEqual([]);
  // every Chromium of the run is gone: sandboxed, it names neither the data dir nor the instance,
  // but it stays in a cgroup of the embedded server that started it until it exits
  expect(run.serverPids).toHaveLength(1);
  expect(instanceProcesses(undefined, run.serverPids[0])).toEqual([]);
  return run.stdout;
}

describe('examples', () => {
  it('scrape-playwright prints the products of both pages', async () => {
    const out = JSON.parse(await example('scrape-playwright')) as unknown;
    expect(out).toEqual({
      instance: expect.stringMatching(/^inst_/),
      products: [
        { name: 'Kettle', price: 25 },
        { name: 'Teapot', price: 18.5 },
        { name: 'Mug', price: 6 },
      ],
    });
  });

  it('scrape-puppeteer prints the products', async () => {
    const out = JSON.parse(await example('scrape-puppeteer')) as unknown;
    expect(out).toEqual({
      instance: expect.stringMatching(/^inst_/),
      products: [
        { name: 'Kettle', price: 25 },
        { name: 'Teapot', price: 18.5 },
      ],
    });
  });

  it('auth-reuse: the second session is signed in by the saved state', async () => {
    const out = await example('auth-reuse');
    expect(out).toBe(
      'first session:  signed in\nsecond session: signed in, localStorage token present\n',
    );
  });

  it('agent-loop: looks, decides and acts until the wizard is done', async () => {
    const lines = (await example('agent-loop')).trim().split('\n');
    expect(lines.map((l) => l.replace(/\(\d+ byte PNG\)/, '(PNG)'))).toEqual([
      'turn 1: saw "Step 1: your name" (PNG) → type',
      'turn 2: saw "Step 1: your name" (PNG) → click',
      'turn 3: saw "Step 2: your plan" (PNG) → click',
      'turn 4: saw "Step 3: confirm" (PNG) → click',
      'turn 5: saw "Done: welcome aboard" (PNG) → done',
    ]);
  });

  it('agent-computer: reaches its goal from pixels and computer actions alone', async () => {
    const out = await example('agent-computer');
    expect(out).toMatch(/field at \{.*\} — click it, type "burrow"/);
    expect(out).toMatch(/button at \{.*\} — click it/);
    expect(out).toMatch(/the green banner is on screen — goal reached/);
  });

  it('client-ubuntu: bash, a streamed upload and Python on the same instance', async () => {
    expect(await example('client-ubuntu')).toBe('bash: Linux\npython: ok 43.5\n');
  });
});
