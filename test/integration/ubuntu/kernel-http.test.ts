/**
 * Code execution and notebooks over HTTP on a real ubuntu instance (bubblewrap sandbox when it
 * works here): response shapes, env reaching kernels, 404s, notebook files in the instance's
 * home, and kernel processes gone when the instance stops or the server is SIGKILLed.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CodeExecuteResult, Notebook, NotebookCell } from '../../../src/api/index.js';
import { eventually } from '../../helpers/server.js';
import { useInstance, useServer } from '../../helpers/use-server.js';

/** Host pids of processes whose environment holds `tag` (an instance variable set for the test). */
function pidsWithEnv(tag: string): number[] {
  const out: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/environ`, 'latin1').includes(tag)) out.push(Number(entry));
    } catch {
      /* gone, or not ours to read */
    }
  }
  return out;
}
const isKernel = (pid: number) => {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('ipykernel_launcher');
  } catch {
    return false;
  }
};

const server = useServer();
const instance = useInstance(server, 'ubuntu');
const tag = `BURROW_KERNEL_TAG_${randomBytes(6).toString('hex')}`;

const post = async (path: string, json: unknown = {}) =>
  server.api(`/v1/instance/${instance.id}${path}`, { json });
const get = (path: string) => server.api(`/v1/instance/${instance.id}${path}`);
async function ok<T>(res: Promise<Response>): Promise<T> {
  const r = await res;
  const body = (await r.json()) as T;
  expect(r.status, JSON.stringify(body)).toBe(200);
  return body;
}
const execute = (code: string, extra: Record<string, unknown> = {}) =>
  ok<CodeExecuteResult & { kernel_restarted?: boolean }>(post('/code/execute', { code, ...extra }));

beforeAll(async () => {
  // tags every process of the instance started from now on (the bridge and its kernels)
  await ok(post('/env', { variables: { [tag]: '1', GREETING: 'hello' } }));
});

describe('code/execute over HTTP', () => {
  it('answers the COMPAT shape, keeps state, and runs with /usr/bin/python3 in the home dir', async () => {
    const first = await execute(
      'import os, sys\nvalue = 20\nprint(sys.executable, os.getcwd() == os.environ["HOME"])',
    );
    expect(Object.keys(first).sort()).toEqual([
      'error',
      'execution_count',
      'outputs',
      'status',
      'stderr',
      'stdout',
    ]);
    expect(CodeExecuteResult.parse(first)).toBeTruthy();
    expect(first).toMatchObject({
      status: 'ok',
      stdout: '/usr/bin/python3 True\n',
      stderr: '',
      error: null,
    });
    const second = await execute('value + 1', { kernel_name: 'python3' });
    expect(second.outputs).toEqual([
      {
        output_type: 'execute_result',
        execution_count: second.execution_count,
        data: { 'text/plain': '21' },
        metadata: {},
      },
    ]);
  });

  it('sees env variables set and deleted through the env API', async () => {
    const code = 'import os\nprint(os.environ.get("GREETING"), os.environ.get("LATER"))';
    expect((await execute(code)).stdout).toBe('hello None\n');
    await ok(post('/env', { variables: { LATER: 'set after start' } }));
    await ok(post('/env/delete', { keys: ['GREETING'] }));
    expect((await execute(code)).stdout).toBe('None set after start\n');
  });

  it('times out, errors and restarts with the documented fields', async () => {
    const slow = await execute('print("tick", flush=True)\nwhile True:\n    pass', { timeout: 1 });
    expect(slow).toMatchObject({
      status: 'timeout',
      stdout: 'tick\n',
      error: { ename: 'KeyboardInterrupt' },
    });
    const failed = await execute('undefined_name');
    expect(failed).toMatchObject({ status: 'error', error: { ename: 'NameError' } });
    expect(failed.error?.traceback.join('\n')).toContain('undefined_name');
    const died = await execute('import os\nos.kill(os.getpid(), 9)');
    expect(died).toMatchObject({ status: 'error', error: { ename: 'DeadKernelError' } });
    const back = await execute('"value" in globals()');
    expect(back).toMatchObject({ status: 'ok', kernel_restarted: true });
    expect(back.stderr).toMatch(/^\[burrow\] /);
    expect(back.outputs[0]?.data).toEqual({ 'text/plain': 'False' });
  });

  it('answers 400 for an unknown kernel and 422 for a bad body', async () => {
    const unknown = await post('/code/execute', { code: '1', kernel_name: 'cobol' });
    expect(unknown.status).toBe(400);
    expect(((await unknown.json()) as { detail: string }).detail).toContain('cobol');
    expect((await post('/code/execute', { code: 1 })).status).toBe(422);
  });
});

describe('notebooks over HTTP', () => {
  it('lists kernels, and round-trips a notebook through create, cells, execute all and get', async () => {
    const kernels = await ok<{ name: string; language: string }[]>(get('/notebook/kernels'));
    expect(kernels).toContainEqual(
      expect.objectContaining({ name: 'python3', language: 'python' }),
    );

    const created = Notebook.parse(await ok(post('/notebook/create', { name: 'http demo' })));
    expect(created).toMatchObject({ name: 'http demo', kernel_name: 'python3', cells: [] });
    const nid = created.id;
    const add = (type: string, content: string) =>
      ok<NotebookCell>(post(`/notebook/${nid}/cell`, { type, content }));
    const a = await add('code', 'import os\nn = 2\nos.environ.get("LATER")');
    const md = await add('markdown', '## notes');
    const b = await add('code', 'n * 21');
    const c = await add('code', 'raise RuntimeError("stop here")');
    const d = await add('code', 'n = 0');

    const all = await ok<NotebookCell[]>(post(`/notebook/${nid}/execute`, {}));
    expect(all.map((x) => x.id)).toEqual([a.id, md.id, b.id, c.id, d.id]);
    expect(all.map((x) => NotebookCell.parse(x).type)).toEqual([
      'code',
      'markdown',
      'code',
      'code',
      'code',
    ]);
    expect(all[0]?.outputs?.[0]).toMatchObject({ data: { 'text/plain': "'set after start'" } });
    expect(all[2]?.outputs?.[0]).toMatchObject({
      output_type: 'execute_result',
      data: { 'text/plain': '42' },
    });
    expect(all[3]?.outputs?.[0]).toMatchObject({ output_type: 'error', ename: 'RuntimeError' });
    expect(all[4]).toMatchObject({ execution_count: null, outputs: [] });

    const one = await ok<NotebookCell>(
      post(`/notebook/${nid}/cell/${d.id}/execute`, { timeout: 30 }),
    );
    expect(one.execution_count).toBe((all[3]?.execution_count ?? 0) + 1);
    const got = Notebook.parse(await ok(get(`/notebook/${nid}`)));
    expect(got.cells[4]).toEqual(one);

    // the .ipynb file is in the instance's home, where the instance's own tools see it
    const read = await ok<{ output?: string; error?: string }>(
      post('/bash', {
        command: `python3 -c "import json; nb = json.load(open('notebooks/${nid}.ipynb')); print(nb['nbformat'], nb['nbformat_minor'], [c['cell_type'] for c in nb['cells']], nb['cells'][2]['outputs'][0]['data'])"`,
      }),
    );
    expect(read.output?.trim()).toBe(
      "4 5 ['code', 'markdown', 'code', 'code', 'code'] {'text/plain': ['42']}",
    );
  });

  it('answers 404 for unknown notebooks and cells, and 200 then 404 around delete', async () => {
    const nb = Notebook.parse(
      await ok(post('/notebook/create', { name: 'short lived', kernel_name: 'python3' })),
    );
    const missing = await get('/notebook/does-not-exist');
    expect(missing.status).toBe(404);
    expect(await missing.json()).toEqual({ detail: expect.stringContaining('does-not-exist') });
    expect(
      (await post('/notebook/does-not-exist/cell', { type: 'code', content: '1' })).status,
    ).toBe(404);
    expect((await post('/notebook/does-not-exist/execute', {})).status).toBe(404);
    expect((await post(`/notebook/${nb.id}/cell/nope/execute`, {})).status).toBe(404);
    expect((await post(`/notebook/${nb.id}/delete`)).status).toBe(200);
    expect((await get(`/notebook/${nb.id}`)).status).toBe(404);
    expect((await post(`/notebook/${nb.id}/delete`)).status).toBe(404);
    expect((await post('/notebook/create', { name: 'x', kernel_name: 'cobol' })).status).toBe(400);
  });

  it('stops every kernel and the bridge with the instance', async () => {
    const pids = pidsWithEnv(tag);
    expect(pids.filter(isKernel).length).toBeGreaterThanOrEqual(2); // code kernel + notebook kernel
    expect((await server.api(`/v1/instance/${instance.id}/stop`, { method: 'POST' })).status).toBe(
      200,
    );
    await eventually(() => pidsWithEnv(tag).length === 0, 'kernel processes to exit');
  });
});

describe('kernels and a SIGKILLed server', () => {
  const children: ChildProcess[] = [];
  const dirs: string[] = [];
  afterAll(() => {
    for (const c of children) c.kill('SIGKILL');
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  it('leave no kernel or bridge process behind', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'burrow-kernel-kill-'));
    dirs.push(dataDir);
    const key = 'kernel-kill-key-123';
    const child = spawn(
      process.execPath,
      [
        '--import',
        'tsx',
        'src/cli/main.ts',
        'serve',
        '--port',
        '0',
        '--data-dir',
        dataDir,
        '--api-key',
        key,
      ],
      { cwd: resolve(import.meta.dirname, '../../..'), stdio: ['ignore', 'pipe', 'pipe'] },
    );
    children.push(child);
    let out = '';
    child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
    await eventually(
      () => /listening on http:\/\/127\.0\.0\.1:\d+/.test(out),
      'listening line',
      20_000,
    );
    const url = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(out)![1]!;
    const call = async (path: string, body: unknown) => {
      const res = await fetch(url + path, {
        method: 'POST',
        headers: { 'x-api-key': key, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      const answer = (await res.json()) as Record<string, unknown>;
      expect(res.status, JSON.stringify(answer)).toBe(200);
      return answer;
    };
    const killTag = `BURROW_KERNEL_KILL_${randomBytes(6).toString('hex')}`;
    const inst = String((await call('/v1/start', { instance_type: 'ubuntu' })).id);
    await call(`/v1/instance/${inst}/env`, { variables: { [killTag]: '1' } });
    expect(await call(`/v1/instance/${inst}/code/execute`, { code: '1 + 1' })).toMatchObject({
      status: 'ok',
    });
    expect(pidsWithEnv(killTag).filter(isKernel).length).toBe(1);
    child.kill('SIGKILL');
    await eventually(() => pidsWithEnv(killTag).length === 0, 'kernels to die with the server');
  });
});
