/**
 * ubuntu instances over HTTP, through the real server: tools on the wire, env, uploads (size
 * limit, streaming), pause/resume and stop.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  eventually,
  instanceDisk,
  instancePids,
  pidsMatching,
  testServer,
  type TestServer,
} from '../../helpers/server.js';

let server: TestServer;
let id: string;
let dir: string;

const post = async (path: string, json?: unknown) => {
  const res = await server.api(
    `/v1/instance/${id}${path}`,
    json === undefined ? { method: 'POST' } : { json },
  );
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
};
const bash = async (req: Record<string, unknown>) => (await post('/bash', req)).body;

/** A multipart body streamed from `size` zero bytes, `path` first (so the server need not spool). */
function multipart(
  path: string,
  filename: string,
  size: number,
): { body: ReadableStream<Uint8Array>; type: string } {
  const boundary = `----burrow${Math.random().toString(16).slice(2)}`;
  const head = Buffer.from(
    `--${boundary}\r\nContent-Disposition: form-data; name="path"\r\n\r\n${path}\r\n` +
      `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="${filename}"\r\n` +
      'Content-Type: application/octet-stream\r\n\r\n',
  );
  const tail = Buffer.from(`\r\n--${boundary}--\r\n`);
  const chunk = new Uint8Array(1 << 20);
  let left = size;
  let sentHead = false;
  const body = new ReadableStream<Uint8Array>({
    pull(controller) {
      if (!sentHead) {
        sentHead = true;
        controller.enqueue(new Uint8Array(head));
      } else if (left > 0) {
        const n = Math.min(left, chunk.length);
        controller.enqueue(n === chunk.length ? chunk : chunk.subarray(0, n));
        left -= n;
      } else {
        controller.enqueue(new Uint8Array(tail));
        controller.close();
      }
    },
  });
  return { body, type: `multipart/form-data; boundary=${boundary}` };
}

async function upload(path: string, filename: string, size: number) {
  const { body, type } = multipart(path, filename, size);
  try {
    const res = await server.api(`/v1/instance/${id}/upload`, {
      method: 'POST',
      body,
      headers: { 'content-type': type },
      duplex: 'half',
    } as RequestInit);
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  } catch (err) {
    return { status: 0, body: { error: String(err) } };
  }
}

/** Every file under `root`, relative. */
function filesUnder(root: string): string[] {
  const out: string[] = [];
  const walk = (d: string, rel: string) => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const r = rel ? `${rel}/${e.name}` : e.name;
      if (e.isDirectory()) walk(join(d, e.name), r);
      else out.push(r);
    }
  };
  walk(root, '');
  return out.sort();
}

beforeAll(async () => {
  server = await testServer();
  const res = await server.api('/v1/start', {
    json: { instance_type: 'ubuntu', resolution: [1000, 701] },
  });
  const inst = (await res.json()) as { id: string; status: string };
  expect(res.status).toBe(200);
  expect(inst.status).toBe('running');
  id = inst.id;
  const runs = join(server.dataDir, 'instances');
  dir = readdirSync(runs)
    .map((r) => join(runs, r, id))
    .find((d) => existsSync(d))!;
  expect(dir).toBeDefined();
});

afterAll(async () => {
  await server?.close();
});

describe('ubuntu over HTTP', () => {
  it('bash, edit and file answer tool results', async () => {
    expect(
      await bash({ command: 'echo hi; echo err >&2; exit_with() { return $1; }; exit_with 2' }),
    ).toEqual({
      output: 'hi\n',
      error: 'err\n',
      system: 'session 1: exit status 2',
    });
    const created = await post('/edit', { command: 'create', path: 'w/a.txt', file_text: 'x\n' });
    expect(created).toEqual({
      status: 200,
      body: { output: 'File created successfully at: /home/user/w/a.txt' },
    });
    expect((await post('/file', { command: 'read', path: '/home/user/w/a.txt' })).body).toEqual({
      output: 'x\n',
    });
    const unknown = await post('/file', { command: 'nope' });
    expect(unknown.status).toBe(200);
    expect(unknown.body.error).toMatch(/^Unknown command 'nope'. Supported commands: read, write/);
    const escape = await post('/file', { command: 'write', path: '/etc/x', content: 'x' });
    expect(escape.status).toBe(200);
    expect(escape.body.error).toMatch(/Access denied/);
  });

  it('env: set reaches running and new sessions, get lists it, delete removes it', async () => {
    await bash({ command: 'true', session: 1 });
    expect(await post('/env', { variables: { FOO: 'bar baz' } })).toMatchObject({
      status: 200,
      body: { status: expect.any(String) },
    });
    expect((await server.api(`/v1/instance/${id}/env`).then((r) => r.json())) as unknown).toEqual({
      variables: { FOO: 'bar baz' },
    });
    expect((await bash({ command: 'echo "$FOO"', session: 1 })).output).toBe('bar baz\n');
    expect((await bash({ command: 'echo "$FOO"', session: 4 })).output).toBe('bar baz\n');
    expect((await post('/env/delete', { keys: ['FOO'] })).status).toBe(200);
    expect((await bash({ command: 'echo "[${FOO-}]"', session: 4 })).output).toBe('[]\n');
    expect((await server.api(`/v1/instance/${id}/env`).then((r) => r.json())) as unknown).toEqual({
      variables: {},
    });
  });

  it('upload lands in home (parents created), readable by bash', async () => {
    const form = new FormData();
    form.append('path', 'uploads/deep/hello.txt');
    form.append('file', new Blob(['hello upload\n'], { type: 'text/plain' }), 'local-name.txt');
    const res = await server.api(`/v1/instance/${id}/upload`, { method: 'POST', body: form });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({
      filename: 'local-name.txt',
      path: '/home/user/uploads/deep/hello.txt',
      media_type: 'text/plain',
    });
    expect((await bash({ command: 'cat uploads/deep/hello.txt' })).output).toBe('hello upload\n');

    const intoDir = new FormData();
    intoDir.append('path', '/tmp/');
    intoDir.append('file', new Blob(['t']), '../../evil.txt');
    const r2 = await server.api(`/v1/instance/${id}/upload`, { method: 'POST', body: intoDir });
    expect(await r2.json()).toMatchObject({ filename: 'evil.txt', path: '/tmp/evil.txt' });
    expect(readFileSync(join(instanceDisk(id).tmp, 'evil.txt'), 'utf8')).toBe('t');

    const outside = new FormData();
    outside.append('path', '/etc/evil.txt');
    outside.append('file', new Blob(['x']), 'x');
    const r3 = await server.api(`/v1/instance/${id}/upload`, { method: 'POST', body: outside });
    expect(r3.status).toBe(400);
    expect(((await r3.json()) as { detail: string }).detail).toMatch(
      /Access denied: \/etc\/evil.txt is read-only/,
    );
    expect(existsSync('/etc/evil.txt')).toBe(false);
  });

  it('refuses an upload over the limit (default 100 MiB) and leaves nothing on disk', async () => {
    // the server's side of the instance and the instance's own disk
    const files = () => [...filesUnder(dir), ...filesUnder(dirname(instanceDisk(id).home))];
    const before = files();
    const res = await upload('big/too-big.bin', 'too-big.bin', 200 * 1024 * 1024);
    expect(res).toMatchObject({
      status: 413,
      body: { detail: expect.stringMatching(/larger than|too large/) },
    });
    await eventually(() => files().join() === before.join(), 'temp files to be gone', 5000);
    expect(files()).toEqual(before);
    expect((await bash({ command: 'echo still-ok' })).output).toBe('still-ok\n');
  });

  it('streams a large upload without buffering it in memory', async () => {
    const size = 90 * 1024 * 1024;
    const base = process.memoryUsage().rss;
    let peak = base;
    const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 20);
    const res = await upload('big/large.bin', 'large.bin', size);
    clearInterval(sampler);
    expect(res).toMatchObject({ status: 200, body: { path: '/home/user/big/large.bin' } });
    expect((await bash({ command: 'stat -c %s big/large.bin' })).output).toBe(`${size}\n`);
    expect(peak - base).toBeLessThan(48 * 1024 * 1024);
    expect(readdirSync(join(instanceDisk(id).home, 'big'))).toEqual(['large.bin']);
  });

  it('pause freezes the instance, resume continues', async () => {
    await bash({
      command: '(while true; do date +%s%N > /tmp/tick; sleep 0.05; done) >/dev/null 2>&1 &',
    });
    await new Promise((r) => setTimeout(r, 300));
    expect(await post('/pause')).toEqual({ status: 200, body: { status: 'paused' } });
    const tick = () => readFileSync(join(instanceDisk(id).tmp, 'tick'), 'utf8');
    await new Promise((r) => setTimeout(r, 100));
    const frozen = tick();
    await new Promise((r) => setTimeout(r, 400));
    expect(tick()).toBe(frozen);
    expect((await post('/bash', { command: 'true' })).status).toBe(400);
    const resumed = await post('/resume');
    expect(resumed.status).toBe(200);
    await eventually(() => tick() !== frozen, 'the loop to run again', 3000);
  });

  it('stop leaves no process and removes the directory', async () => {
    await bash({ command: 'sleep 600 & setsid sleep 601 &' });
    const disk = dirname(instanceDisk(id).home);
    expect(instancePids(id).length).toBeGreaterThan(2);
    expect(pidsMatching('Xvfb -screen 0 1000x701x24').length).toBeGreaterThan(0);
    expect(await post('/stop')).toEqual({ status: 200, body: { status: 'terminated' } });
    // stop answers once the instance is unusable; its processes and disk go right after
    await eventually(() => instancePids(id).length === 0, 'every process of the instance to exit');
    expect(pidsMatching('Xvfb -screen 0 1000x701x24')).toEqual([]);
    expect(pidsMatching('sleep 60[01]')).toEqual([]);
    await eventually(() => !existsSync(dir), 'the instance directory to be removed', 5000);
    await eventually(() => !existsSync(disk), "the instance's disk to be removed", 5000);
  });
});
