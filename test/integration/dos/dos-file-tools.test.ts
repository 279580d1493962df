/**
 * What an ubuntu instance writes costs the server's main thread and memory only what the file
 * tools show of it (an outside tester's A6 and A3, attack5). The instance writes files of nothing
 * but newlines and a directory of hundreds of thousands of hard links; the operator then makes the
 * ordinary calls:
 * - A6a: `edit view` of lines 1–3 of 30 MiB of newlines used to split all 31 million lines on the
 *   main thread (`/livez` held ~5 s, RSS ~870 MiB). Now the toolbox inside the instance picks the
 *   range and the server holds those three lines.
 * - A6b: `file read` with `line_numbers` of 60 MiB of newlines numbered every line on the main
 *   thread (over 30 s, 5 GB, then "Invalid string length"); 8 MiB here shows the same shape. Now
 *   the toolbox numbers at most 100,000 lines (8 MiB) and the answer says where it stopped; an
 *   `insert` into that file finds its line in shared slices, no array of lines made (its bound
 *   is looser: the whole text is still copied a few times, see below).
 * - A3: `file list` (and `edit view`) of a directory of 990,000 entries decoded a 15 MB header of
 *   990,000 arrays on the main thread (5.8 s). Now the toolbox sorts and cuts a listing to 10,000
 *   entries and says how many there are in all; the server decodes at most 2 MiB of header.
 * Each time another client's `/livez` p99 stays within `livezBound` of a control probed in the same
 * window (test/helpers/livez-beside.ts) and the server's RSS grows by less than 100 MiB.
 */
import { describe, expect, it } from 'vitest';
import { livezBound, said, watchLivez, type Beside } from '../../helpers/livez-beside.js';
import { useInstance, useServer } from '../../helpers/use-server.js';

const MiB = 1024 * 1024;
/** The bounds the answers show (files.ts `MAX_LIST_ENTRIES`, fsops.ts `MAX_NUMBERED_LINES`). */
const LIST_ENTRIES = 10_000;
const NUMBERED_LINES = 100_000;
const ENTRIES = 300_000;

const server = useServer({}, { timeout: 180_000 });
const desktop = useInstance(server, 'ubuntu', {}, 180_000);

interface Result {
  output?: string;
  error?: string;
  system?: string;
}

async function call(tool: string, body: Record<string, unknown>): Promise<Result> {
  const res = await server.api(`/v1/instance/${desktop.id}/${tool}`, { json: body });
  expect(res.status).toBe(200);
  return (await res.json()) as Result;
}

/** Runs `command` in the instance's shell; its output. */
async function inside(command: string): Promise<string> {
  const r = await call('bash', { command, timeout: 120 });
  expect(r.error ?? '').toBe('');
  return r.output ?? '';
}

/** The calls made while another client probes `/livez`; what it saw and the RSS growth. */
async function watched<T>(
  calls: () => Promise<T>,
): Promise<{ got: T; seen: Beside; grew: number }> {
  const watch = await watchLivez(server.url);
  const rss0 = process.memoryUsage().rss;
  const done = calls();
  const seen = await watch.until(done);
  return { got: await done, seen, grew: seen.peakRss - rss0 };
}

function bounded(what: string, seen: Beside, grew: number, margin = 100): void {
  console.log(`dos-file-tools ${what}:`, said(seen), { rssGrewMiB: Math.round(grew / MiB) });
  expect(seen.server.p99).toBeLessThan(livezBound(seen, margin));
  expect(grew).toBeLessThan(100 * MiB);
}

const newlines = (path: string, mib: number) =>
  inside(`python3 -c "open('${path}','w').write(chr(10)*(${mib}*1024*1024))" && echo written`);

describe('files of newlines', { retry: 1 }, () => {
  it('edit view of lines 1-3 of 30 MiB of newlines holds only those lines (A6a)', async () => {
    expect(await newlines('/home/user/nl30.txt', 30)).toMatch(/written/);
    const { got, seen, grew } = await watched(() =>
      call('edit', { command: 'view', path: '/home/user/nl30.txt', view_range: [1, 3] }),
    );
    bounded('edit view [1, 3]', seen, grew);
    expect(got.output).toBe(
      "Here's the result of running `cat -n` on /home/user/nl30.txt:\n     1\t\n     2\t\n     3\t\n",
    );
  }, 180_000);

  it('a numbered read of 8 MiB of newlines stops at its line bound and says so (A6b)', async () => {
    expect(await newlines('/home/user/nl8.txt', 8)).toMatch(/written/);
    const {
      got: read,
      seen,
      grew,
    } = await watched(() =>
      call('file', { command: 'read', path: '/home/user/nl8.txt', line_numbers: true }),
    );
    bounded('file read line_numbers', seen, grew);
    const edited = await watched(() =>
      call('file', { command: 'insert', path: '/home/user/nl8.txt', line: 2, text: 'x' }),
    );
    // an edit still decodes the file into one string and encodes it again (in slices, but each
    // a copy of the whole text in one step: ~3 ms for 8 MiB on an idle machine, 50-120 ms on a
    // loaded one), so its bound is looser: what it must not do is work per line (seconds)
    bounded('file insert', edited.seen, edited.grew, 1000);
    const insert = edited.got;
    const lines = read.output!.split('\n');
    expect(lines.length).toBe(NUMBERED_LINES);
    expect(lines[0]).toBe('     1\t');
    expect(lines.at(-1)).toBe(`${String(NUMBERED_LINES).padStart(6)}\t`);
    expect(read.system).toMatch(
      new RegExp(`showing lines 1-${NUMBERED_LINES} of ${8 * MiB}\\b.*view_range`),
    );
    expect(insert.output).toBe('Inserted 1 line at line 2 of /home/user/nl8.txt');
    const after = await call('file', {
      command: 'view',
      path: '/home/user/nl8.txt',
      view_range: [1, 3],
    });
    expect(after.output).toBe('     1\t\n     2\tx\n     3\t');
  }, 180_000);
});

describe(`a directory of ${ENTRIES} entries`, { retry: 1 }, () => {
  it('file list and edit view answer the first entries and how many were left out (A3)', async () => {
    const made = await inside(
      [
        'python3 -c "',
        'import os, shutil',
        // made anew: a retry of this test finds the last attempt's links there
        "d = os.path.expanduser('~/d'); shutil.rmtree(d, ignore_errors=True); os.makedirs(d)",
        // hard links use no inodes; a file has at most 65,000 of them
        "bases = [os.path.expanduser('~/base%d' % b) for b in range(8)]",
        "[open(b, 'w').close() for b in bases]",
        `[os.link(bases[i // 50000], os.path.join(d, '%06x' % i)) for i in range(${ENTRIES})]`,
        'print(len(os.listdir(d)))',
        '"',
      ].join('\n'),
    );
    expect(made.trim()).toBe(String(ENTRIES));
    const { got, seen, grew } = await watched(async () => [
      await call('file', { command: 'list', path: '/home/user/d' }),
      await call('edit', { command: 'view', path: '/home/user/d' }),
    ]);
    bounded('file list, edit view of the directory', seen, grew);
    const [list, view] = got;
    const names = list!.output!.split('\n');
    expect(names.length).toBe(LIST_ENTRIES);
    expect(names[0]).toBe('000000');
    expect(names.at(-1)).toBe((LIST_ENTRIES - 1).toString(16).padStart(6, '0'));
    const left = `${ENTRIES - LIST_ENTRIES} left out`;
    expect(list!.system).toMatch(`showing the first ${LIST_ENTRIES} of ${ENTRIES} entries`);
    expect(list!.system).toContain(left);
    const shown = view!.output!.split('\n').filter((l) => l.startsWith('/home/user/d/'));
    expect(shown.length).toBe(LIST_ENTRIES);
    expect(view!.output).toContain(`showing the first ${LIST_ENTRIES} of ${ENTRIES} entries`);
    expect(view!.output).toContain(left);
  }, 180_000);
});
