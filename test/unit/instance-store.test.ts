/**
 * The instance store contract (test/helpers/instance-store-contract.ts) on the default store,
 * without a journal and with one on a real file system (the next run reads it; a write is made to
 * fail for a real reason: a directory where the journal goes), and the journal's own promises:
 * its lines as earlier burrows wrote them, lines cut by a kill skipped, two stores on one file.
 */
import { mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { MemoryInstanceStore, parseJournal } from '../../src/server/instances/store.js';
import { describeInstanceStore, row } from '../helpers/instance-store-contract.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});
const tempDir = () => {
  const d = mkdtempSync(join(tmpdir(), 'burrow-instance-store-'));
  dirs.push(d);
  return d;
};
const read = (path: string) => {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return '';
  }
};

describeInstanceStore(
  'MemoryInstanceStore, no journal',
  async () => ({ store: new MemoryInstanceStore() }),
  { persistent: false },
);

describeInstanceStore('MemoryInstanceStore with a journal file', async () => {
  const dir = tempDir();
  const journal = join(dir, 'instances.jsonl');
  let runs = 0;
  return {
    store: new MemoryInstanceStore({ journal }),
    reopen: async () =>
      new MemoryInstanceStore({
        journal: join(dir, `next-${++runs}.jsonl`),
        earlier: [read(journal)],
      }),
    breakWrites: async () => {
      renameSync(journal, `${journal}.aside`);
      mkdirSync(journal);
      return async () => {
        rmSync(journal, { recursive: true });
        renameSync(`${journal}.aside`, journal);
      };
    },
    whole: async () => {
      for (const line of read(journal).split('\n')) if (line) JSON.parse(line);
    },
  };
});

describe('MemoryInstanceStore journal', () => {
  it('writes the lines earlier burrows read, and reads theirs', async () => {
    const dir = tempDir();
    const journal = join(dir, 'j');
    const store = new MemoryInstanceStore({ journal });
    const a = row();
    await store.put(a);
    await store.put({ ...a, status: 'running' }); // no line: nothing a next run needs changed
    await store.ended(a.id, 'expired');
    expect(
      read(journal)
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as unknown),
    ).toEqual([
      { id: a.id, type: a.instance_type, launch_time: a.launch_time, resolution: a.resolution },
      { id: a.id, ended: 'expired' },
    ]);
    // an earlier burrow's journal, killed in the middle of a line
    const old =
      `${JSON.stringify({ id: 'inst_1', type: 'ubuntu', launch_time: a.launch_time, resolution: [800, 600] })}\n` +
      `${JSON.stringify({ id: 'inst_2', type: 'browser', launch_time: a.launch_time, resolution: [1, 2] })}\n` +
      `${JSON.stringify({ id: 'inst_1', ended: 'stopped' })}\n{"id":"inst_2","end`;
    const next = new MemoryInstanceStore({ earlier: [old, '', 'not json\n[1]\n{"id":3}'] });
    expect(await next.adopt()).toEqual([
      {
        id: 'inst_1',
        instance_type: 'ubuntu',
        launch_time: a.launch_time,
        resolution: [800, 600],
        status: 'terminated',
        end_reason: 'stopped',
      },
      {
        id: 'inst_2',
        instance_type: 'browser',
        launch_time: a.launch_time,
        resolution: [1, 2],
        status: 'terminated',
        end_reason: 'server_restart',
      },
    ]);
  });

  it('takes two stores appending to one file at once, every line whole', async () => {
    const journal = join(tempDir(), 'j');
    const [one, two] = [new MemoryInstanceStore({ journal }), new MemoryInstanceStore({ journal })];
    const rows = Array.from({ length: 100 }, () => row());
    await Promise.all(rows.map((r, i) => (i % 2 ? one : two).put(r)));
    await Promise.all(rows.map((r, i) => (i % 2 ? one : two).ended(r.id, 'stopped')));
    const entries = parseJournal(read(journal));
    expect(entries).toHaveLength(200);
    const adopted = await new MemoryInstanceStore({ earlier: [read(journal)] }).adopt();
    expect(adopted.map((r) => r.id).sort()).toEqual(rows.map((r) => r.id).sort());
    expect(adopted.every((r) => r.end_reason === 'stopped')).toBe(true);
  });

  it('skips a line cut by a kill and reads the next one', () => {
    const text = `{"id":"inst_1","type":"ubuntu","launch_ti\n${JSON.stringify({ id: 'inst_2', type: 'ubuntu', launch_time: 'x', resolution: [1, 2] })}\n`;
    expect(parseJournal(text).map((e) => e.id)).toEqual(['inst_2']);
  });
});
