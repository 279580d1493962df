/**
 * Notebooks on real Jupyter kernels, through the kernel layer with a plain process spawn in a
 * throwaway home: `.ipynb` files in `<home>/notebooks` (nbformat 4.5, as Jupyter writes them),
 * cells and outputs round-tripped through the file, one kernel per notebook, execute-all
 * stopping at the first error, and 404s for unknown notebooks and cells.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { NotebookCell } from '../../../src/api/index.js';
import { EncodedJson } from '../../../src/internal/encoded-json.js';
import { Supervised, descendants } from '../../../src/internal/process.js';
import { HttpError } from '../../../src/server/errors.js';
import { createKernels, type Kernels } from '../../../src/server/ubuntu/kernels/index.js';

type Json = Record<string, unknown>;

let home: string;
let kernels: Kernels;
const nbPath = (id: string) => join(home, 'notebooks', `${id}.ipynb`);
const readNb = (id: string) => JSON.parse(readFileSync(nbPath(id), 'utf8')) as Json;
/** The notebooks' answers decoded (the HTTP layer sends their bytes as they are). */
type Decoded<T> = {
  [K in keyof T]: T[K] extends (...args: infer A) => Promise<EncodedJson<infer R>>
    ? (...args: A) => Promise<R>
    : T[K];
};
function decoded<T extends object>(target: T): Decoded<T> {
  return new Proxy(target, {
    get(t, key) {
      const v: unknown = Reflect.get(t, key);
      if (typeof v !== 'function') return v;
      return async (...args: unknown[]) => {
        const out: unknown = await (v as (...a: unknown[]) => Promise<unknown>).apply(t, args);
        return out instanceof EncodedJson ? out.value() : out;
      };
    },
  }) as Decoded<T>;
}
const nb = () => decoded(kernels.notebooks);

beforeAll(() => {
  home = mkdtempSync(join(tmpdir(), 'burrow-kernel-nb-'));
  kernels = createKernels({
    spawn: (argv, o) =>
      new Supervised(argv[0]!, argv.slice(1), { env: o.env, stdio: o.stdio, cwd: o.cwd }),
    sandboxHome: home,
    env: () => ({ PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: home, LANG: 'C.UTF-8' }),
  });
});
afterAll(async () => {
  await kernels?.stop();
  rmSync(home, { recursive: true, force: true });
});

/** The nbformat 4.5 schema's shape rules that a writer can get wrong. */
function expectNbformat45(file: Json): void {
  expect(Object.keys(file).sort()).toEqual(['cells', 'metadata', 'nbformat', 'nbformat_minor']);
  expect(file.nbformat).toBe(4);
  expect(file.nbformat_minor).toBe(5);
  const meta = file.metadata as Json;
  expect(meta.kernelspec).toMatchObject({
    name: expect.any(String),
    display_name: expect.any(String),
  });
  const ids = new Set<string>();
  const multiline = (v: unknown) =>
    typeof v === 'string' || (Array.isArray(v) && v.every((s) => typeof s === 'string'));
  for (const cell of file.cells as Json[]) {
    expect(cell.id).toMatch(/^[A-Za-z0-9_-]{1,64}$/);
    expect(ids.has(cell.id as string)).toBe(false);
    ids.add(cell.id as string);
    expect(multiline(cell.source)).toBe(true);
    expect(typeof cell.metadata).toBe('object');
    if (cell.cell_type === 'code') {
      expect(Object.keys(cell).sort()).toEqual([
        'cell_type',
        'execution_count',
        'id',
        'metadata',
        'outputs',
        'source',
      ]);
      expect(cell.execution_count === null || Number.isInteger(cell.execution_count)).toBe(true);
      for (const out of cell.outputs as Json[]) {
        const keys = Object.keys(out).sort();
        switch (out.output_type) {
          case 'stream':
            expect(keys).toEqual(['name', 'output_type', 'text']);
            expect(multiline(out.text)).toBe(true);
            break;
          case 'display_data':
            expect(keys).toEqual(['data', 'metadata', 'output_type']);
            break;
          case 'execute_result':
            expect(keys).toEqual(['data', 'execution_count', 'metadata', 'output_type']);
            break;
          case 'error':
            expect(keys).toEqual(['ename', 'evalue', 'output_type', 'traceback']);
            break;
          default:
            throw new Error(`unexpected output_type ${String(out.output_type)}`);
        }
      }
    } else {
      expect(['markdown', 'raw']).toContain(cell.cell_type);
      expect(Object.keys(cell).sort()).toEqual(['cell_type', 'id', 'metadata', 'source']);
    }
  }
}

async function status(p: Promise<unknown>): Promise<number> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(HttpError);
  return (err as HttpError).status;
}

describe('notebooks', () => {
  it('creates a notebook file named after the notebook, with its kernelspec', async () => {
    const created = await nb().create('Sales 2024', 'python3');
    expect(created).toMatchObject({
      id: 'Sales-2024',
      name: 'Sales 2024',
      kernel_name: 'python3',
      cells: [],
    });
    const file = readNb('Sales-2024');
    expectNbformat45(file);
    expect(file.metadata).toMatchObject({
      kernelspec: { name: 'python3' },
      language_info: { name: 'python' },
    });
    expect((await nb().create('Sales 2024', 'python3')).id).toBe('Sales-2024-2');
    expect(await nb().get('Sales-2024')).toEqual(created);
    expect(await status(nb().create('x', 'no-such-kernel'))).toBe(400);
  });

  it('adds code, markdown and raw cells, stored in the file as nbformat cells', async () => {
    const { id } = await nb().create('cells', 'python3');
    const code = await nb().addCell(id, {
      type: 'code',
      content: 'a = 1\nb = 2',
      metadata: { tags: ['setup'] },
    });
    const md = await nb().addCell(id, { type: 'markdown', content: '# Title\ntext' });
    const raw = await nb().addCell(id, { type: 'raw', content: 'raw text' });
    expect(code).toMatchObject({
      type: 'code',
      content: 'a = 1\nb = 2',
      metadata: { tags: ['setup'] },
      outputs: [],
      execution_count: null,
    });
    expect(md).toEqual({ id: md.id, type: 'markdown', content: '# Title\ntext', metadata: {} });
    expect(raw).toMatchObject({ type: 'raw', content: 'raw text' });

    const file = readNb(id);
    expectNbformat45(file);
    expect(file.cells).toEqual([
      {
        id: code.id,
        cell_type: 'code',
        source: ['a = 1\n', 'b = 2'],
        metadata: { tags: ['setup'] },
        outputs: [],
        execution_count: null,
      },
      { id: md.id, cell_type: 'markdown', source: ['# Title\n', 'text'], metadata: {} },
      { id: raw.id, cell_type: 'raw', source: ['raw text'], metadata: {} },
    ]);
    expect((await nb().get(id)).cells).toEqual([code, md, raw]);
    // executing a markdown cell runs nothing and returns it
    expect(await nb().executeCell(id, md.id, {})).toEqual(md);
  });

  it('executes a cell: outputs and execution count round-trip through the .ipynb file', async () => {
    const { id } = await nb().create('round trip', 'python3');
    const cell = await nb().addCell(id, {
      type: 'code',
      content: 'print("line 1\\nline 2")\n6 * 7',
    });
    const done = await nb().executeCell(id, cell.id, { timeout: 60 });
    expect(done.execution_count).toBe(1);
    expect(done.outputs).toEqual([
      { output_type: 'stream', name: 'stdout', text: 'line 1\nline 2\n' },
      {
        output_type: 'execute_result',
        execution_count: 1,
        data: { 'text/plain': '42' },
        metadata: {},
      },
    ]);
    const file = readNb(id);
    expectNbformat45(file);
    const stored = (file.cells as Json[])[0]!;
    expect(stored.execution_count).toBe(1);
    expect((stored.outputs as Json[])[0]).toEqual({
      output_type: 'stream',
      name: 'stdout',
      text: ['line 1\n', 'line 2\n'],
    });
    expect((await nb().get(id)).cells[0]).toEqual(done);
  });

  it('executes all code cells in order with shared state, stopping at the first error', async () => {
    const { id } = await nb().create('run all', 'python3');
    const add = (type: 'code' | 'markdown', content: string) => nb().addCell(id, { type, content });
    const c1 = await add('code', 'a = 1');
    const m = await add('markdown', 'between');
    const c2 = await add('code', 'print(a + 1)');
    const c3 = await add('code', 'raise ValueError("boom")');
    const c4 = await add('code', 'never = True');

    const cells = await nb().execute(id, {});
    expect(cells.map((c) => c.id)).toEqual([c1.id, m.id, c2.id, c3.id, c4.id]);
    const [r1, rm, r2, r3, r4] = cells as [
      NotebookCell,
      NotebookCell,
      NotebookCell,
      NotebookCell,
      NotebookCell,
    ];
    expect(r1.execution_count).toBe(1);
    expect(rm).toEqual(m);
    expect(r2).toMatchObject({
      execution_count: 2,
      outputs: [{ output_type: 'stream', text: '2\n' }],
    });
    expect(r3.execution_count).toBe(3);
    expect(r3.outputs).toEqual([
      expect.objectContaining({ output_type: 'error', ename: 'ValueError', evalue: 'boom' }),
    ]);
    expect(r4).toMatchObject({ execution_count: null, outputs: [] }); // not run
    expect((await nb().get(id)).cells).toEqual(cells);
    expectNbformat45(readNb(id));

    // the notebook's kernel kept its state and never ran the last cell
    const probe = await nb().addCell(id, { type: 'code', content: '(a, "never" in globals())' });
    const ran = await nb().executeCell(id, probe.id, {});
    expect(ran.outputs?.[0]).toMatchObject({ data: { 'text/plain': '(1, False)' } });
  });

  it('stops execute-all at a cell that times out, and the kernel answers afterwards', async () => {
    const { id } = await nb().create('timeouts', 'python3');
    const slow = await nb().addCell(id, {
      type: 'code',
      content: 'print("going", flush=True)\nwhile True:\n    pass',
    });
    const after = await nb().addCell(id, { type: 'code', content: 'reached = True' });
    const cells = await nb().execute(id, { timeout: 1 });
    expect(cells[0]?.outputs).toEqual([
      { output_type: 'stream', name: 'stdout', text: 'going\n' },
      expect.objectContaining({ output_type: 'error', ename: 'KeyboardInterrupt' }),
    ]);
    expect(cells[1]).toEqual(after);
    const again = await nb().executeCell(id, after.id, {});
    expect(again.execution_count).toBe((cells[0]?.execution_count ?? 0) + 1);
    expect(slow.id).toBe(cells[0]?.id);
  });

  it('gives each notebook its own kernel, and runs different notebooks concurrently', async () => {
    const one = await nb().create('kernel one', 'python3');
    const two = await nb().create('kernel two', 'python3');
    const set = await nb().addCell(one.id, { type: 'code', content: 'mine = 1' });
    const probe = await nb().addCell(two.id, { type: 'code', content: '"mine" in globals()' });
    await nb().executeCell(one.id, set.id, {});
    const seen = await nb().executeCell(two.id, probe.id, {});
    expect(seen.outputs?.[0]).toMatchObject({ data: { 'text/plain': 'False' } });

    const sleep1 = await nb().addCell(one.id, {
      type: 'code',
      content: 'import time; time.sleep(1.5)',
    });
    const sleep2 = await nb().addCell(two.id, {
      type: 'code',
      content: 'import time; time.sleep(1.5)',
    });
    const started = Date.now();
    await Promise.all([
      nb().executeCell(one.id, sleep1.id, {}),
      nb().executeCell(two.id, sleep2.id, {}),
    ]);
    expect(Date.now() - started).toBeLessThan(2900);
  });

  it('reads a notebook file put there by other means, giving its cells stable ids', async () => {
    writeFileSync(
      nbPath('uploaded'),
      JSON.stringify({
        nbformat: 4,
        nbformat_minor: 4,
        metadata: { kernelspec: { name: 'python3', display_name: 'Python 3' } },
        cells: [
          { cell_type: 'markdown', metadata: {}, source: 'Uploaded' },
          {
            cell_type: 'code',
            metadata: {},
            source: ['x = 20\n', 'x + 1'],
            outputs: [],
            execution_count: null,
          },
        ],
      }),
    );
    const first = await nb().get('uploaded');
    expect(first).toMatchObject({ id: 'uploaded', name: 'uploaded', kernel_name: 'python3' });
    expect(first.cells.map((c) => [c.type, c.content])).toEqual([
      ['markdown', 'Uploaded'],
      ['code', 'x = 20\nx + 1'],
    ]);
    expect((await nb().get('uploaded')).cells.map((c) => c.id)).toEqual(
      first.cells.map((c) => c.id),
    );
    expectNbformat45(readNb('uploaded'));
    const [, code] = await nb().execute('uploaded', {});
    expect(code?.outputs?.[0]).toMatchObject({ data: { 'text/plain': '21' } });
  });

  it('answers 404 for unknown notebooks and cells, and deletes notebooks with their kernel', async () => {
    const { id } = await nb().create('doomed', 'python3');
    const cell = await nb().addCell(id, { type: 'code', content: 'import os; os.getpid()' });
    const ran = await nb().executeCell(id, cell.id, {});
    const kernelPid = Number((ran.outputs?.[0]?.data as Record<string, string>)['text/plain']);
    expect(kernelPid).toBeGreaterThan(0);
    const bridge = await kernels.bridgePid();
    expect(descendants(bridge!)).toContain(kernelPid);

    for (const missing of ['nope', '../notebooks/doomed', '.hidden', 'a/b']) {
      expect(await status(nb().get(missing))).toBe(404);
      expect(await status(nb().delete(missing))).toBe(404);
      expect(await status(nb().addCell(missing, { type: 'code', content: '' }))).toBe(404);
      expect(await status(nb().executeCell(missing, cell.id, {}))).toBe(404);
      expect(await status(nb().execute(missing, {}))).toBe(404);
    }
    expect(await status(nb().executeCell(id, 'no-such-cell', {}))).toBe(404);

    expect(await nb().delete(id)).toMatchObject({ status: 'success' });
    expect(existsSync(nbPath(id))).toBe(false);
    expect(await status(nb().get(id))).toBe(404);
    const gone = async () => {
      for (let i = 0; i < 100 && descendants(bridge!).includes(kernelPid); i++) {
        await new Promise((r) => setTimeout(r, 50));
      }
      return !descendants(bridge!).includes(kernelPid);
    };
    expect(await gone()).toBe(true);
  });
});
