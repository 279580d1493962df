/** The leak ledger and the reap decision, on a real directory with real (dead and live) pids. */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Ledger, ownerAlive, reap, type LedgerEntry } from '../../src/session/ledger.js';

let dir: string;
let ledger: Ledger;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'bledger-'));
  ledger = new Ledger(dir);
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

/** A pid that certainly belonged to a process that has exited. */
const deadPid = () => spawnSync(process.execPath, ['-e', '0']).pid!;

function orphan(instanceId: string, baseUrl: string, embedded = false): LedgerEntry {
  const entry = {
    instanceId,
    baseUrl,
    embedded,
    pid: deadPid(),
    pidStart: null,
    startedAt: new Date().toISOString(),
  };
  writeFileSync(join(dir, `${instanceId}.json`), JSON.stringify(entry));
  return entry;
}

describe('Ledger', () => {
  it('records this process and the normalised base URL, and removes the entry again', async () => {
    await ledger.record('inst_a', 'http://127.0.0.1:8787/', false);
    const [entry, ...rest] = await ledger.entries();
    expect(rest).toEqual([]);
    expect(entry).toEqual({
      instanceId: 'inst_a',
      baseUrl: 'http://127.0.0.1:8787',
      embedded: false,
      pid: process.pid,
      pidStart: expect.stringMatching(/^\d+$/),
      startedAt: expect.any(String),
    });
    expect(ownerAlive(entry!)).toBe(true);
    await ledger.remove('inst_a', 'http://127.0.0.1:8787');
    expect(readdirSync(dir)).toEqual([]);
  });

  it('keeps instances of different servers with the same id apart', async () => {
    await ledger.record('inst_a', 'http://a.test', false);
    await ledger.record('inst_a', 'http://b.test', false);
    expect((await ledger.entries()).map((e) => e.baseUrl).sort()).toEqual([
      'http://a.test',
      'http://b.test',
    ]);
  });

  it('skips files that are not entries', async () => {
    writeFileSync(join(dir, 'junk.json'), '{"not": "an entry"}');
    writeFileSync(join(dir, 'half.json'), '{"instanceId":');
    expect(await ledger.entries()).toEqual([]);
  });
});

describe('ownerAlive', () => {
  it('is false for an exited process and for a reused pid (another start time)', () => {
    expect(ownerAlive({ pid: deadPid(), pidStart: null })).toBe(false);
    expect(ownerAlive({ pid: process.pid, pidStart: '1' })).toBe(false);
    expect(ownerAlive({ pid: process.pid, pidStart: null })).toBe(true);
  });
});

describe('reap', () => {
  it('stops orphans on the target, forgets embedded ones, skips other servers, keeps failures', async () => {
    const target = 'http://127.0.0.1:8787';
    orphan('inst_target', target);
    orphan('inst_embedded', 'http://127.0.0.1:40000', true);
    orphan('inst_elsewhere', 'https://remote.test');
    orphan('inst_broken', target);
    await ledger.record('inst_live', target, false); // this process: not an orphan

    const stopped: string[] = [];
    const report = await reap(ledger, {
      baseUrl: `${target}/`,
      stop: async (id) => {
        if (id === 'inst_broken') throw new Error('server said no');
        stopped.push(id);
      },
    });
    expect(stopped).toEqual(['inst_target']);
    expect(report.stopped.map((e) => e.instanceId)).toEqual(['inst_target']);
    expect(report.removed.map((e) => e.instanceId)).toEqual(['inst_embedded']);
    expect(report.skipped.map((e) => e.instanceId)).toEqual(['inst_elsewhere']);
    expect(report.failed.map((f) => [f.entry.instanceId, (f.error as Error).message])).toEqual([
      ['inst_broken', 'server said no'],
    ]);
    const left = (await ledger.entries()).map((e) => e.instanceId).sort();
    expect(left).toEqual(['inst_broken', 'inst_elsewhere', 'inst_live']);
  });

  it('without a target only forgets embedded orphans', async () => {
    orphan('inst_remote', 'http://127.0.0.1:8787');
    orphan('inst_embedded', 'http://127.0.0.1:40000', true);
    const report = await reap(ledger);
    expect(report.removed.map((e) => e.instanceId)).toEqual(['inst_embedded']);
    expect(report.skipped.map((e) => e.instanceId)).toEqual(['inst_remote']);
  });

  it('never writes an API key', async () => {
    await ledger.record('inst_a', 'http://127.0.0.1:8787', false);
    const text = readFileSync(join(dir, readdirSync(dir)[0]!), 'utf8');
    expect(Object.keys(JSON.parse(text) as object).sort()).toEqual([
      'baseUrl',
      'embedded',
      'instanceId',
      'pid',
      'pidStart',
      'startedAt',
    ]);
  });
});
