/**
 * The toolbox process (src/server/toolbox/toolbox.ts and toolbox.py) on real files, started with
 * a plain spawn (the sandbox's own tests start it inside instances): binary contents both ways,
 * its rules, a FIFO that must not hang it, restarts after a crash, deadlines, uploads that leave
 * nothing behind, and a full file system.
 */
import { execFileSync } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { alive, Supervised } from '../../../src/internal/process.js';
import { SandboxFiles } from '../../../src/server/toolbox/files.js';
import {
  Toolbox,
  ToolboxError,
  ToolboxUnavailable,
  type ToolboxOptions,
} from '../../../src/server/toolbox/toolbox.js';

let root: string;
let home: string;
const toolboxes: Toolbox[] = [];

function start(opts: Partial<ToolboxOptions> = {}): { toolbox: Toolbox; files: SandboxFiles } {
  const toolbox = new Toolbox({
    spawn: (argv, o) =>
      new Supervised(argv[0]!, argv.slice(1), { env: o.env, stdio: o.stdio, cwd: o.cwd }),
    home,
    writable: [home, join(root, 'tmp')],
    hidden: ['/proc', '/sys', '/dev', join(root, 'hidden')],
    ...opts,
  });
  toolboxes.push(toolbox);
  return { toolbox, files: new SandboxFiles(toolbox) };
}

/** The error a promise rejects with. */
const failure = (p: Promise<unknown>) =>
  p.then(
    () => {
      throw new Error('expected a failure');
    },
    (err: unknown) => err,
  );

beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), 'burrow-toolbox-'));
  home = join(root, 'home');
  for (const d of ['home', 'tmp', 'hidden']) mkdirSync(join(root, d));
  writeFileSync(join(root, 'hidden', 'secret'), 'secret');
  writeFileSync(join(root, 'outside.txt'), 'outside');
});

afterAll(async () => {
  await Promise.all(toolboxes.map((t) => t.stop()));
  rmSync(root, { recursive: true, force: true });
});

describe('toolbox', () => {
  it('moves binary contents both ways unchanged, large ones included', async () => {
    const { files } = start();
    const all = Buffer.from(Array.from({ length: 256 * 4096 }, (_, i) => i % 256));
    expect(await files.write('bin/all.bin', all)).toEqual({
      path: join(home, 'bin/all.bin'),
      appended: false,
    });
    expect((await files.read('bin/all.bin', all.length)).data.equals(all)).toBe(true);
    const big = Buffer.alloc(24 * 1024 * 1024, 0xab);
    writeFileSync(join(home, 'big.bin'), big);
    expect((await files.read('big.bin', big.length)).data.equals(big)).toBe(true);
    const tooLarge = await failure(files.read('big.bin', 1000));
    expect(tooLarge).toBeInstanceOf(ToolboxError);
    expect(tooLarge).toMatchObject({ code: 'TOO_LARGE', details: { size: big.length, max: 1000 } });
  });

  it('applies its rules: writes only where allowed, hidden paths refused', async () => {
    const { files } = start();
    const code = async (p: Promise<unknown>) => ((await failure(p)) as ToolboxError).code;
    expect(await code(files.write(join(root, 'outside.txt'), 'x'))).toBe('EROFS');
    expect(await code(files.read(join(root, 'hidden', 'secret'), 100))).toBe('HIDDEN');
    expect(await code(files.read('/proc/self/environ', 100))).toBe('HIDDEN');
    expect(await code(files.remove(home, { recursive: true }))).toBe('OWN_DIR');
    expect(await code(files.copy(root, 'rootcopy'))).toBe('UNWALKABLE');
    expect(readFileSync(join(root, 'outside.txt'), 'utf8')).toBe('outside');
    // a symlink out of the writable places is followed by the kernel, and the rule still holds
    execFileSync('ln', ['-s', join(root, 'outside.txt'), join(home, 'out-link')]);
    expect(await code(files.write('out-link', 'x'))).toBe('EROFS');
    expect((await files.read('out-link', 100)).data.toString()).toBe('outside');
  });

  it('answers a FIFO without blocking, and an unknown op without dying', async () => {
    const { toolbox, files } = start();
    execFileSync('mkfifo', [join(home, 'fifo')]);
    expect(await failure(files.read('fifo', 100))).toMatchObject({ code: 'NOT_REGULAR' });
    expect(await failure(toolbox.request('frobnicate'))).toMatchObject({ code: 'BAD_REQUEST' });
    expect(await failure(toolbox.request('read', { path: 'x' }))).toMatchObject({
      code: 'BAD_REQUEST',
    });
    expect((await files.stat('fifo', false)).type).toBe('other');
  });

  it('starts on first use and comes back after a crash, retrying the call in flight', async () => {
    const { toolbox, files } = start();
    expect(toolbox.pid()).toBeUndefined();
    await files.stat('.');
    const first = toolbox.pid()!;
    expect(alive(first)).toBe(true);
    process.kill(first, 'SIGKILL');
    await sleep(100);
    expect((await files.stat('.')).type).toBe('dir');
    const second = toolbox.pid()!;
    expect(second).not.toBe(first);
    // dies while answering: the call is retried once on a new process
    process.kill(second, 'SIGSTOP');
    const pending = files.write('retried.txt', 'r');
    await sleep(100);
    process.kill(second, 'SIGKILL');
    expect((await pending).path).toBe(join(home, 'retried.txt'));
    expect(toolbox.pid()).not.toBe(second);
  });

  it('kills a process that misses a deadline; the next call gets a new one', async () => {
    const { toolbox, files } = start({ timeoutMs: 300 });
    await files.stat('.');
    const stuck = toolbox.pid()!;
    process.kill(stuck, 'SIGSTOP');
    const err = await failure(files.stat('.'));
    expect(err).toBeInstanceOf(ToolboxUnavailable);
    expect((err as Error).message).toMatch(/did not finish within 0.3 s/);
    await sleep(300);
    expect(alive(stuck)).toBe(false);
    expect((await files.stat('.')).type).toBe('dir');
  });

  it('leaves nothing of an aborted upload, also when the process died meanwhile', async () => {
    const { toolbox, files } = start();
    mkdirSync(join(home, 'up'));
    const a = await files.openUpload('up/a.bin');
    await a.write(Buffer.alloc(1000, 1));
    expect(readdirSync(join(home, 'up'))).toHaveLength(1); // the temp file
    await a.abort();
    expect(readdirSync(join(home, 'up'))).toEqual([]);

    const b = await files.openUpload('up/b.bin');
    await b.write(Buffer.alloc(1000, 1));
    process.kill(toolbox.pid()!, 'SIGKILL');
    await sleep(100);
    expect(await failure(b.write(Buffer.alloc(10)))).toBeInstanceOf(ToolboxUnavailable);
    await b.abort();
    expect(readdirSync(join(home, 'up'))).toEqual([]);

    const c = await files.openUpload('up/c.bin');
    for (let i = 0; i < 3; i++) await c.write(Buffer.alloc(1 << 20, i));
    await c.commit();
    expect(readdirSync(join(home, 'up'))).toEqual(['c.bin']);
    expect(readFileSync(join(home, 'up/c.bin')).length).toBe(3 << 20);
  });

  it('stops for good', async () => {
    const { toolbox, files } = start();
    await files.stat('.');
    const pid = toolbox.pid()!;
    await toolbox.stop();
    await toolbox.stop();
    expect(alive(pid)).toBe(false);
    expect(await failure(files.stat('.'))).toBeInstanceOf(ToolboxUnavailable);
  });

  it.runIf(process.getuid?.() === 0)(
    'reports a full file system and leaves the old contents in place',
    async () => {
      const small = join(root, 'small');
      mkdirSync(small);
      execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', small]);
      try {
        const { files } = start({ writable: [small] });
        await files.write(join(small, 'keep.txt'), 'kept');
        const err = await failure(files.write(join(small, 'keep.txt'), Buffer.alloc(2 << 20)));
        expect(err).toMatchObject({ code: 'ENOSPC', message: 'No space left on device' });
        const up = await files.openUpload(join(small, 'up.bin'));
        const chunk = await failure(
          (async () => {
            for (let i = 0; i < 4; i++) await up.write(Buffer.alloc(512 * 1024));
          })(),
        );
        expect(chunk).toMatchObject({ code: 'ENOSPC' });
        await up.abort();
        expect(readdirSync(small)).toEqual(['keep.txt']);
        expect(readFileSync(join(small, 'keep.txt'), 'utf8')).toBe('kept');
      } finally {
        execFileSync('umount', [small]);
      }
      expect(existsSync(join(small, 'keep.txt'))).toBe(false);
    },
  );
});
