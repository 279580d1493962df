/**
 * Attacks on the file, edit, notebook and upload tools from inside an ubuntu instance, through
 * the real HTTP API: symlinks to host files and directories, a directory swapped for a symlink in
 * a loop while the tools write (a race), notebook ids with `..`, files the instance may not read,
 * and a full disk. The tools run inside the sandbox as the instance's user (the toolbox), so the
 * kernel keeps them in the instance's view: what the instance cannot reach, they cannot either.
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testServer, type TestServer } from '../../helpers/server.js';

type Body = Record<string, unknown>;

interface Instance {
  server: TestServer;
  id: string;
  post(path: string, json?: unknown): Promise<{ status: number; body: Body }>;
  get(path: string): Promise<{ status: number; body: Body }>;
  bash(command: string): Promise<Body>;
  file(req: Body): Promise<Body>;
  edit(req: Body): Promise<Body>;
  upload(
    path: string,
    name: string,
    data: Uint8Array | string,
  ): Promise<{ status: number; body: Body }>;
}

async function startInstance(server: TestServer): Promise<Instance> {
  const res = await server.api('/v1/start', { json: { instance_type: 'ubuntu' } });
  const started = (await res.json()) as { id: string; status: string };
  const { id, status } = started;
  expect(status, JSON.stringify(started)).toBe('running');
  const answer = async (res: Response) => ({
    status: res.status,
    body: (await res.json()) as Body,
  });
  const post = async (path: string, json?: unknown) =>
    answer(
      await server.api(
        `/v1/instance/${id}${path}`,
        json === undefined ? { method: 'POST' } : { json },
      ),
    );
  return {
    server,
    id,
    post,
    get: async (path) => answer(await server.api(`/v1/instance/${id}${path}`)),
    bash: async (command) => (await post('/bash', { command, timeout: 30 })).body,
    file: async (req) => (await post('/file', req)).body,
    edit: async (req) => (await post('/edit', req)).body,
    upload: async (path, name, data) => {
      const form = new FormData();
      form.append('path', path);
      form.append('file', new Blob([typeof data === 'string' ? data : new Uint8Array(data)]), name);
      return answer(await server.api(`/v1/instance/${id}/upload`, { method: 'POST', body: form }));
    },
  };
}

const SECRET = 'HOST-SECRET-5e1f';
const leaks = (answer: unknown) => JSON.stringify(answer).includes(SECRET);

let inst: Instance;
/** Host files an attacker would like to reach (the server's data dir, nothing inside sees it). */
let host: string;

beforeAll(async () => {
  const server = await testServer();
  host = join(server.dataDir, 'host');
  mkdirSync(join(host, 'victim'), { recursive: true });
  mkdirSync(join(host, 'race-victim'), { recursive: true });
  mkdirSync(join(host, 'nb-victim'), { recursive: true });
  writeFileSync(join(host, 'secret.txt'), `${SECRET}\n`);
  const notebook = (text: string) =>
    JSON.stringify({
      cells: [{ cell_type: 'markdown', id: 'c1', metadata: {}, source: text }],
      metadata: { kernelspec: { name: 'python3', display_name: 'Python 3' } },
      nbformat: 4,
      nbformat_minor: 5,
    });
  writeFileSync(join(host, 'secret.ipynb'), notebook(SECRET));
  writeFileSync(join(host, 'nb-victim', 'keep.ipynb'), notebook('keep me'));
  inst = await startInstance(server);
});

afterAll(async () => {
  await inst?.server.close();
});

describe('symlinks planted in the instance', () => {
  it('lead to the instance’s own view, never to a host file', async () => {
    await inst.bash(
      `ln -sfn ${host}/secret.txt leak && ln -sfn ${host} hostdir && ln -sfn /etc/shadow shadow`,
    );
    const answers = [
      await inst.file({ command: 'read', path: 'leak' }),
      await inst.file({ command: 'read', path: 'leak', mode: 'binary' }),
      await inst.file({ command: 'view', path: 'leak' }),
      await inst.file({ command: 'read', path: 'hostdir/secret.txt' }),
      await inst.file({ command: 'list', path: 'hostdir' }),
      await inst.file({ command: 'copy', src: 'leak', dst: 'copied.txt' }),
      await inst.file({ command: 'grep', pattern: 'SECRET', path: 'hostdir', recursive: true }),
      await inst.edit({ command: 'view', path: 'leak' }),
      await inst.edit({ command: 'view', path: 'hostdir' }),
      await inst.edit({ command: 'str_replace', path: 'leak', old_str: 'HOST', new_str: 'x' }),
    ];
    for (const answer of answers) expect(leaks(answer)).toBe(false);
    expect(answers[0]).toEqual({ error: 'No such file or directory: /home/user/leak' });
    expect(existsSync(join(host, 'secret.txt'))).toBe(true);
    expect(readFileSync(join(host, 'secret.txt'), 'utf8')).toBe(`${SECRET}\n`);
  });

  it('read /etc/shadow only as the instance reads it, never the host’s', async () => {
    const hostShadow = readFileSync('/etc/shadow', 'utf8');
    const cat = await inst.bash('cat /etc/shadow');
    for (const path of ['/etc/shadow', 'shadow']) {
      const answer = await inst.file({ command: 'read', path });
      if (answer.output !== undefined) expect(answer.output).toBe(cat.output);
      else expect(cat.error).toBeDefined(); // the instance cannot read it either
      expect(answer.output).not.toBe(hostShadow);
    }
  });

  it('never redirect a write to the host', async () => {
    await inst.bash(
      `ln -sfn ${host}/written.txt wlink && ln -sfn ${host}/victim vdir && ln -sfn ${host}/secret.txt leak`,
    );
    await inst.file({ command: 'write', path: 'wlink', content: 'x' });
    await inst.file({ command: 'append', path: 'leak', content: 'x' });
    await inst.file({ command: 'write', path: 'vdir/a.txt', content: 'x' });
    await inst.file({ command: 'mkdir', path: 'vdir/sub' });
    await inst.edit({ command: 'create', path: 'vdir/b.txt', file_text: 'x' });
    await inst.file({ command: 'copy', src: '/etc/hostname', dst: 'vdir/' });
    await inst.bash('echo m > moveme');
    await inst.file({ command: 'move', src: 'moveme', dst: 'vdir/moved' });
    await inst.upload('vdir/', 'up.txt', 'x');
    await inst.upload('wlink', 'up.txt', 'x');
    expect(readdirSync(join(host, 'victim'))).toEqual([]);
    expect(existsSync(join(host, 'written.txt'))).toBe(false);
    expect(readFileSync(join(host, 'secret.txt'), 'utf8')).toBe(`${SECRET}\n`);
  });

  it('swapped with a directory in a loop never redirect a write (race)', async () => {
    const victim = join(host, 'race-victim');
    // `race/d` flips between a directory and a symlink to the host directory as fast as the
    // kernel allows (renameat2 RENAME_EXCHANGE), until `race/stop` appears or 60 s passed
    const swapper = [
      'import ctypes, os, time',
      'os.chdir("race")',
      'libc = ctypes.CDLL(None, use_errno=True)',
      'end = time.time() + 60',
      'libc.renameat2(-100, b"d", -100, b"other", 2)',
      'open("started", "w").close()',
      'while time.time() < end and not os.path.exists("stop"):',
      '    for _ in range(1000):',
      '        libc.renameat2(-100, b"d", -100, b"other", 2)',
    ].join('\n');
    await inst.bash(
      `mkdir -p race/d && ln -sfn ${victim} race/other && (python3 -c '${swapper}' >/dev/null 2>&1 &)`,
    );
    // the swap really happens: once the swapper runs, `d` is seen as a link and as a directory
    const seen = await inst.bash(
      'for i in $(seq 100); do [ -e race/started ] && break; sleep 0.1; done; ' +
        'for i in $(seq 400); do stat -c %F race/d 2>/dev/null; done | sort -u',
    );
    const kinds = new Set(String(seen.output).trim().split('\n'));
    expect(kinds).toEqual(new Set(['directory', 'symbolic link']));
    let written = 0;
    for (let i = 0; i < 60; i++) {
      const answers = [
        await inst.file({ command: 'write', path: `race/d/f${i}.txt`, content: 'x' }),
        await inst.edit({ command: 'create', path: `race/d/e${i}.txt`, file_text: 'x' }),
        await inst.upload('race/d/', `u${i}.txt`, 'x'),
      ];
      written += answers.filter((a) => 'output' in a || a.status === 200).length;
    }
    await inst.bash('touch race/stop');
    expect(written).toBeGreaterThan(0);
    expect(readdirSync(victim)).toEqual([]);
  }, 120_000);
});

describe('notebooks', () => {
  it('a notebook file symlinked to the host is not found, read or deleted', async () => {
    await inst.bash(
      `mkdir -p notebooks && ln -sfn ${host}/secret.ipynb notebooks/evil.ipynb && ln -sfn ${host}/nb-victim/keep.ipynb notebooks/keep.ipynb`,
    );
    const got = await inst.get('/notebook/evil');
    expect(got.status).toBe(404);
    expect(leaks(got.body)).toBe(false);
    expect((await inst.post('/notebook/evil/cell', { type: 'raw', content: 'x' })).status).toBe(
      404,
    );
    expect((await inst.post('/notebook/keep/delete')).status).toBe(404);
    expect(readFileSync(join(host, 'secret.ipynb'), 'utf8')).toContain(SECRET);
    expect(existsSync(join(host, 'nb-victim', 'keep.ipynb'))).toBe(true);
  });

  it('a notebooks directory symlinked to the host is not written to or deleted from', async () => {
    await inst.bash(`rm -rf notebooks && ln -sfn ${host}/nb-victim notebooks`);
    // the link leads where it leads inside the instance (its own /tmp), never to the host
    await inst.post('/notebook/create', { name: 'planted' });
    expect((await inst.get('/notebook/keep')).status).toBe(404);
    expect((await inst.post('/notebook/keep/delete')).status).toBe(404);
    expect(readdirSync(join(host, 'nb-victim'))).toEqual(['keep.ipynb']);
    await inst.bash('rm notebooks');
  });

  it('ids and names with `..` stay in the notebooks directory', async () => {
    for (const id of [
      '%2E%2E',
      '%2E%2E%2F%2E%2E%2Fetc%2Fpasswd',
      '..%2Fsecret',
      'a%2F..%2F..%2Fx',
    ]) {
      const res = await inst.get(`/notebook/${id}`);
      expect(res.status).toBeGreaterThanOrEqual(400);
      expect(res.status).toBeLessThan(500);
      expect((await inst.post(`/notebook/${id}/delete`)).status).toBeGreaterThanOrEqual(400);
    }
    expect(existsSync('/etc/passwd')).toBe(true);
    const created = await inst.post('/notebook/create', { name: '../../../../tmp/escape' });
    expect(created).toMatchObject({ status: 200, body: { id: 'tmp-escape' } });
    expect((await inst.bash('ls notebooks')).output).toBe('tmp-escape.ipynb\n');
  });
});

describe('permissions of the instance', () => {
  it('a file the instance cannot read, the tools cannot read', async () => {
    const cat = await inst.bash(
      'echo instance-only > locked && chmod 000 locked && mkdir -p lockeddir && echo inner > lockeddir/f && chmod 000 lockeddir && cat locked; cat lockeddir/f',
    );
    expect(cat.error).toMatch(/locked: Permission denied/);
    expect(cat.error).toMatch(/lockeddir\/f: Permission denied/);
    expect(await inst.file({ command: 'read', path: 'locked' })).toEqual({
      error: 'Permission denied: /home/user/locked',
    });
    expect((await inst.edit({ command: 'view', path: 'locked' })).error).toMatch(
      /Permission denied/,
    );
    expect((await inst.file({ command: 'copy', src: 'locked', dst: 'c' })).error).toMatch(
      /Permission denied/,
    );
    expect((await inst.file({ command: 'read', path: 'lockeddir/f' })).error).toMatch(
      /Permission denied/,
    );
    expect((await inst.file({ command: 'list', path: 'lockeddir' })).error).toMatch(
      /Permission denied/,
    );
    for (const answer of [
      await inst.file({ command: 'read', path: 'locked', mode: 'binary' }),
      await inst.edit({ command: 'view', path: 'lockeddir' }),
    ]) {
      expect(JSON.stringify(answer)).not.toMatch(/instance-only|inner/);
    }
    await inst.bash('chmod 700 lockeddir');
  });

  it('a directory the instance cannot write to, the tools cannot write to', async () => {
    const touch = await inst.bash('mkdir -p ro && chmod 555 ro && touch ro/x');
    expect(touch.error).toMatch(/Permission denied/);
    expect(await inst.file({ command: 'write', path: 'ro/x', content: 'x' })).toEqual({
      error: 'Permission denied: /home/user/ro/x',
    });
    expect((await inst.edit({ command: 'create', path: 'ro/y', file_text: 'x' })).error).toBe(
      'Ran into Permission denied while trying to write to /home/user/ro/y',
    );
    const up = await inst.upload('ro/', 'z', 'x');
    expect(up.status).toBe(400);
    expect((await inst.bash('ls -A ro')).output).toBe('');
    await inst.bash('chmod 755 ro');
  });
});

describe('a full disk', () => {
  let small: Instance | undefined;

  beforeAll(async () => {
    // an instance disk of 24 MiB, where this machine can give instances a disk quota
    const server = await testServer({ isolation: { diskBytes: 24 * 1024 * 1024 } });
    small = await startInstance(server);
    const df = await small.bash('df -k --output=size /home/user | tail -1');
    if (Number(df.output) > 64 * 1024) {
      await server.close();
      small = undefined;
    }
  });

  afterAll(async () => {
    await small?.server.close();
  });

  it('is a clear error, and nothing is half-written', async (ctx) => {
    if (!small) return ctx.skip();
    expect(
      (await small.file({ command: 'write', path: 'keep.txt', content: 'kept\n' })).output,
    ).toBe('Wrote 5 bytes to /home/user/keep.txt');
    const up = await small.upload('up/', 'big.bin', new Uint8Array(40 * 1024 * 1024));
    expect(up.status).toBe(413);
    expect(up.body.detail).toMatch(
      /^No space left on device: \/home\/user\/up\/big.bin \(the instance's disk is full\)/,
    );
    // fill the disk to the last block, then rewrite a file: the old contents stay
    await small.bash('dd if=/dev/zero of=filler bs=1M 2>/dev/null; sync');
    const write = await small.file({
      command: 'write',
      path: 'keep.txt',
      content: 'x'.repeat(1 << 20),
    });
    expect(write.error).toMatch(
      /^No space left on device: \/home\/user\/keep.txt \(the instance's disk is full\)/,
    );
    expect((await small.file({ command: 'read', path: 'keep.txt' })).output).toBe('kept\n');
    await small.bash('rm filler');
    expect((await small.bash('ls -A up; ls -A')).output).not.toMatch(/\.tmp/);
    expect(
      (await small.file({ command: 'append', path: 'keep.txt', content: 'ok\n' })).output,
    ).toBe('Appended 3 bytes to /home/user/keep.txt');
  });
});
