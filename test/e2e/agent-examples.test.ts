/**
 * The vendor agent examples run as a user runs them (`node --import tsx examples/<name>.ts`) on
 * the embedded server, with no API key: the scripted stand-in plays the model through the same
 * message shapes, the mapping acts on a real instance, and the page's banner proves it worked.
 * No Chromium of the run is left.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { instanceProcesses } from '../helpers/server.js';
import { nodeEmbedded } from './run.js';

const dataDir = mkdtempSync(join(tmpdir(), 'bxa-'));
afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

async function example(name: string): Promise<string[]> {
  const run = await nodeEmbedded(['--import', 'tsx', `examples/${name}.ts`], dataDir, {
    ANTHROPIC_API_KEY: undefined,
    OPENAI_API_KEY: undefined,
  });
  expect(run.stderr).not.toMatch(/Error/);
  expect(run.code).toBe(0);
  expect(run.serverPids).toHaveLength(1);
  expect(instanceProcesses(undefined, run.serverPids[0])).toEqual([]);
  return run.stdout.trim().split('\n');
}

describe('vendor agent examples', () => {
  it('agent-anthropic: tool_use blocks through toolResult until the banner thanks us', async () => {
    expect(await example('agent-anthropic')).toEqual([
      'model: scripted stand-in',
      'claude: Let me look at the screen.',
      'step 1: computer screenshot {}',
      'step 2: computer left_click {"coordinate":[250,120]}',
      'step 3: computer type {"text":"burrow"}',
      'step 4: computer left_click {"coordinate":[510,120]}',
      'step 5: computer zoom {"region":[0,180,512,260]}',
      'claude: Done: the banner appeared under the form.',
      'banner: Thanks, burrow!',
    ]);
  }, 120_000);

  it('agent-openai: computer_call items (one and a batch) until the banner thanks us', async () => {
    expect(await example('agent-openai')).toEqual([
      'model: scripted stand-in',
      'step 1: {"type":"screenshot"}',
      'step 2: {"type":"click","button":"left","x":250,"y":120}, {"type":"type","text":"burrow"}',
      'step 3: {"type":"click","button":"left","x":510,"y":120}',
      'model: Done: a banner appeared under the form.',
      'banner: Thanks, burrow!',
    ]);
  }, 120_000);
});
