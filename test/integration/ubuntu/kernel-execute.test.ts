/**
 * code/execute on real Jupyter kernels (Debian's ipykernel under /usr/bin/python3), through the
 * kernel layer with a plain process spawn in a throwaway home: state, streams, errors,
 * timeouts, dead kernels, env, rich output, and no process left behind.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { alive, Supervised, descendants } from '../../../src/internal/process.js';
import { HttpError } from '../../../src/server/errors.js';
import {
  createKernels,
  type Kernels,
  type SandboxSpawn,
} from '../../../src/server/ubuntu/kernels/index.js';

const plainSpawn: SandboxSpawn = (argv, o) =>
  new Supervised(argv[0]!, argv.slice(1), { env: o.env, stdio: o.stdio, cwd: o.cwd });

const cmdline = (pid: number) => {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ');
  } catch {
    return '';
  }
};
async function eventually(check: () => boolean, ms = 10_000): Promise<boolean> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (check()) return true;
    await new Promise((r) => setTimeout(r, 50));
  }
  return check();
}
async function kernelPids(k: Kernels): Promise<number[]> {
  const bridge = await k.bridgePid();
  if (bridge === undefined) return [];
  return descendants(bridge).filter((p) => cmdline(p).includes('ipykernel_launcher'));
}

let home: string;
let vars: Record<string, string>;
let kernels: Kernels;

beforeAll(() => {
  home = mkdtempSync(join(tmpdir(), 'burrow-kernel-exec-'));
  vars = { BURROW_TEST_VAR: 'at-start', TO_DELETE: 'yes' };
  kernels = createKernels({
    spawn: plainSpawn,
    sandboxHome: home,
    env: () => ({
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      HOME: home,
      LANG: 'C.UTF-8',
      ...vars,
    }),
  });
});
afterAll(async () => {
  await kernels?.stop();
  rmSync(home, { recursive: true, force: true });
});

const run = async (code: string, timeout?: number) =>
  (await kernels.execute(code, 'python3', timeout)).value();

describe('code/execute', () => {
  it('keeps state between calls and counts executions', async () => {
    const first = await run('x = 41');
    expect(first).toMatchObject({ status: 'ok', outputs: [], stdout: '', stderr: '', error: null });
    expect(first.kernel_restarted).toBeUndefined();
    const second = await run('x + 1');
    expect(second.status).toBe('ok');
    expect(second.execution_count).toBe((first.execution_count ?? 0) + 1);
    expect(second.outputs).toEqual([
      {
        output_type: 'execute_result',
        execution_count: second.execution_count,
        data: { 'text/plain': '42' },
        metadata: {},
      },
    ]);
  });

  it('separates stdout from stderr, in nbformat stream outputs and in the plain fields', async () => {
    const r = await run(
      'import sys\nprint("to out")\nprint("to err", file=sys.stderr)\nprint("more out")',
    );
    expect(r.status).toBe('ok');
    expect(r.stdout).toBe('to out\nmore out\n');
    expect(r.stderr).toBe('to err\n');
    expect(r.outputs.every((o) => o.output_type === 'stream')).toBe(true);
    const text = (name: string) =>
      r.outputs
        .filter((o) => o.name === name)
        .map((o) => o.text)
        .join('');
    expect(text('stdout')).toBe('to out\nmore out\n');
    expect(text('stderr')).toBe('to err\n');
  });

  it('reports an exception with its traceback, without ANSI colours, after what was printed', async () => {
    const r = await run('print("before")\ndef f():\n    return 1 / 0\nf()');
    const all = JSON.stringify(r);
    expect(r, all).toMatchObject({
      status: 'error',
      stdout: 'before\n',
      error: { ename: 'ZeroDivisionError', evalue: 'division by zero' },
    });
    const tb = r.error?.traceback.join('\n') ?? '';
    expect(tb, all).toContain('return 1 / 0');
    expect(tb, all).not.toContain('\u001b[');
    expect(r.outputs.at(-1), all).toMatchObject({
      output_type: 'error',
      ename: 'ZeroDivisionError',
    });
    // the kernel is fine afterwards
    const after = await run('x');
    expect(after.outputs[0]?.data, JSON.stringify(after)).toEqual({ 'text/plain': '41' });
  });

  it('interrupts a runaway execution at its timeout and the kernel keeps its state', async () => {
    await run('kept = "still here"');
    const started = Date.now();
    const r = await run('import time\nprint("started", flush=True)\nwhile True:\n    pass', 2);
    const took = Date.now() - started;
    expect(r.status).toBe('timeout');
    expect(r.stdout).toBe('started\n');
    expect(r.error?.ename).toBe('KeyboardInterrupt');
    expect(took).toBeGreaterThanOrEqual(1900);
    expect(took).toBeLessThan(7000);
    const after = await run('kept');
    expect(after).toMatchObject({
      status: 'ok',
      outputs: [{ data: { 'text/plain': "'still here'" } }],
    });
    expect(after.kernel_restarted).toBeUndefined();
  });

  it('restarts a killed kernel on the next call and says so', async () => {
    await run('state = 1');
    const [pid, ...others] = await kernelPids(kernels);
    expect(pid).toBeDefined();
    expect(others).toEqual([]); // one default kernel so far
    process.kill(pid!, 'SIGKILL');
    expect(await eventually(() => !alive(pid!))).toBe(true);

    const r = await run('print("fresh")\n"state" in globals()');
    expect(r.status).toBe('ok');
    expect(r.kernel_restarted).toBe(true);
    expect(r.stderr).toMatch(/^\[burrow\] The kernel had died and was restarted/);
    expect(r.stdout).toBe('fresh\n');
    expect(r.outputs.at(-1)?.data).toEqual({ 'text/plain': 'False' });
    const [newPid] = await kernelPids(kernels);
    expect(newPid).not.toBe(pid);
    // the notice is given once
    expect((await run('1')).kernel_restarted).toBeUndefined();
  });

  it('restarts a kernel that ignores the interrupt, within the timed-out call', async () => {
    await run('lost = True');
    const code =
      'import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nprint("ignoring", flush=True)\nwhile True:\n    time.sleep(0.05)';
    const r = await run(code, 1);
    expect(r).toMatchObject({ status: 'timeout', stdout: 'ignoring\n', kernel_restarted: true });
    expect(r.error?.ename).toBe('TimeoutError');
    expect(r.stderr).toMatch(
      /\[burrow\] The kernel did not stop after the interrupt and was restarted/,
    );
    const next = await run('"lost" in globals()');
    expect(next.status).toBe('ok');
    expect(next.kernel_restarted).toBeUndefined(); // already said
    expect(next.outputs[0]?.data).toEqual({ 'text/plain': 'False' });
  });

  it('survives its bridge dying: the call in flight fails, the next one restarts', async () => {
    await run('before_bridge_death = 1');
    const bridge = await kernels.bridgePid();
    const [kernel] = await kernelPids(kernels);
    const inFlight = run('import time\ntime.sleep(30)');
    await new Promise((r) => setTimeout(r, 300));
    process.kill(bridge!, 'SIGKILL');
    const failed = await inFlight;
    expect(failed).toMatchObject({ status: 'error', error: { ename: 'DeadKernelError' } });
    expect(await eventually(() => !alive(kernel!))).toBe(true); // it died with its bridge
    const next = await run('"before_bridge_death" in globals()');
    expect(next).toMatchObject({ status: 'ok', kernel_restarted: true });
    expect(next.outputs[0]?.data).toEqual({ 'text/plain': 'False' });
    expect(await kernels.bridgePid()).not.toBe(bridge);
  });

  it('answers a DeadKernelError when the kernel dies during the call, then recovers', async () => {
    const r = await run('import os\nprint("bye", flush=True)\nos.kill(os.getpid(), 9)');
    expect(r.status).toBe('error');
    expect(r.error?.ename).toBe('DeadKernelError');
    const next = await run('2 + 2');
    expect(next).toMatchObject({ status: 'ok', kernel_restarted: true });
    expect(next.outputs[0]?.data).toEqual({ 'text/plain': '4' });
  });

  it('gives kernels the instance env, and env changes reach a running kernel', async () => {
    const code =
      'import os\nprint(os.environ.get("BURROW_TEST_VAR"), os.environ.get("TO_DELETE"), os.environ.get("ADDED"))';
    expect((await run(code)).stdout).toBe('at-start yes None\n');
    vars = { BURROW_TEST_VAR: 'changed', ADDED: 'new' }; // TO_DELETE deleted
    expect((await run(code)).stdout).toBe('changed None new\n');
    expect((await run('import os; os.getcwd()')).outputs[0]?.data).toEqual({
      'text/plain': `'${home}'`,
    });
  });

  it('returns rich output as nbformat data (image/png)', async () => {
    const png = [
      'import base64, struct, zlib',
      'from IPython.display import Image, display',
      'def chunk(t, d): return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d))',
      'raw = b"\\x89PNG\\r\\n\\x1a\\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)) + chunk(b"IDAT", zlib.compress(b"\\x00\\xff\\x00\\x00")) + chunk(b"IEND", b"")',
      'display(Image(data=raw))',
      'display({"text/html": "<b>hi</b>", "text/plain": "hi"}, raw=True)',
    ].join('\n');
    const r = await run(png);
    expect(r.status).toBe('ok');
    const [image, html] = r.outputs;
    expect(image?.output_type).toBe('display_data');
    const data = image?.data as Record<string, string>;
    const bytes = Buffer.from(data['image/png'] ?? '', 'base64');
    expect(bytes.subarray(0, 8)).toEqual(
      Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    );
    expect(html).toMatchObject({ output_type: 'display_data', data: { 'text/html': '<b>hi</b>' } });
  });

  it('rejects an unknown kernel name with a 400', async () => {
    const err = await kernels.execute('1', 'no-such-kernel', undefined).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(HttpError);
    expect((err as HttpError).status).toBe(400);
    expect((err as HttpError).detail).toContain('no-such-kernel');
  });

  it('runs calls on one kernel in order', async () => {
    const results = await Promise.all([
      run('import time\ntime.sleep(0.3)\norder = ["a"]'),
      run('order.append("b")'),
      run('order'),
    ]);
    expect(results.map((r) => r.status)).toEqual(['ok', 'ok', 'ok']);
    expect(results[2]?.outputs[0]?.data).toEqual({ 'text/plain': "['a', 'b']" });
  });

  it('runs the call after an error even on a kernel that aborts requests after errors', async () => {
    // ipykernel aborts requests arriving within `stop_on_error_timeout` after an error when the
    // failing request had stop_on_error; the default window is tiny but real under load
    const dir = join(home, '.local/share/jupyter/kernels/abort-window');
    mkdirSync(dir, { recursive: true });
    writeFileSync(
      join(dir, 'kernel.json'),
      JSON.stringify({
        argv: [
          '/usr/bin/python3',
          '-m',
          'ipykernel_launcher',
          '-f',
          '{connection_file}',
          '--Kernel.stop_on_error_timeout=5',
        ],
        display_name: 'Python (abort window)',
        language: 'python',
      }),
    );
    expect(await kernels.notebooks.kernels()).toContainEqual({
      name: 'abort-window',
      display_name: 'Python (abort window)',
      language: 'python',
    });
    const failed = (await kernels.execute('1 / 0', 'abort-window', 30)).value();
    expect(failed.error?.ename).toBe('ZeroDivisionError');
    const next = (await kernels.execute('"ran"', 'abort-window', 30)).value();
    expect(next, JSON.stringify(next)).toMatchObject({
      status: 'ok',
      outputs: [{ data: { 'text/plain': "'ran'" } }],
    });
  });

  it('lists the installed kernelspecs, python3 among them', async () => {
    const specs = await kernels.notebooks.kernels();
    expect(specs).toContainEqual({
      name: 'python3',
      display_name: expect.any(String),
      language: 'python',
    });
  });

  it('leaves no bridge or kernel process after stop', async () => {
    const bridge = await kernels.bridgePid();
    const pids = await kernelPids(kernels);
    expect(bridge).toBeDefined();
    expect(pids.length).toBe(2); // python3 and abort-window
    await kernels.stop();
    await kernels.stop(); // idempotent
    expect(await eventually(() => [bridge!, ...pids].every((p) => !alive(p)))).toBe(true);
    const err = await run('1').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(HttpError);
  });
});

describe('kernel processes and the server process', () => {
  it('die when the process that started them is SIGKILLed', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'burrow-kernel-owner-'));
    const module = fileURLToPath(
      new URL('../../../src/server/ubuntu/kernels/index.ts', import.meta.url),
    );
    const proc = fileURLToPath(new URL('../../../src/internal/process.ts', import.meta.url));
    const script = `
      import { Supervised } from ${JSON.stringify(proc)};
      import { createKernels } from ${JSON.stringify(module)};
      const k = createKernels({
        spawn: (argv, o) => new Supervised(argv[0], argv.slice(1), { env: o.env, stdio: o.stdio, cwd: o.cwd }),
        sandboxHome: ${JSON.stringify(dir)},
        env: () => ({ PATH: process.env.PATH, HOME: ${JSON.stringify(dir)} }),
      });
      const r = (await k.execute('import os; os.getpid()', 'python3', 60)).value();
      console.log(JSON.stringify({ bridge: await k.bridgePid(), kernel: Number(r.outputs[0].data['text/plain']) }));
      setInterval(() => {}, 1000);
    `;
    const owner = spawn(
      process.execPath,
      ['--import', 'tsx', '--input-type=module', '-e', script],
      {
        stdio: ['ignore', 'pipe', 'inherit'],
      },
    );
    try {
      const line = await new Promise<string>((resolve, reject) => {
        let out = '';
        owner.stdout.on('data', (c: Buffer) => {
          out += c.toString();
          if (out.includes('\n')) resolve(out.split('\n')[0]!);
        });
        owner.once('exit', (code) => reject(new Error(`owner exited with ${code}: ${out}`)));
      });
      const { bridge, kernel } = JSON.parse(line) as { bridge: number; kernel: number };
      expect(alive(bridge)).toBe(true);
      expect(alive(kernel)).toBe(true);
      owner.kill('SIGKILL');
      expect(await eventually(() => !alive(bridge) && !alive(kernel))).toBe(true);
    } finally {
      owner.kill('SIGKILL');
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
