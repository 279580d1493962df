/**
 * `Sandbox.prepareSpawn` (src/server/sandbox/sandbox.ts) on real sandboxes: the chain started
 * ahead becomes the first command of its stdio's shape, with exactly the arguments and
 * environment given (spaces, empty strings and shell characters intact, nothing of the launch
 * step's own left: not its descriptor, not a variable); a first command of another shape ends it
 * unused, as does a command refused for a NUL in it; a stop ends one never used; and it leaves a
 * sandbox made ahead `fresh`.
 */
import { readFileSync } from 'node:fs';
import type { Readable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { BROWSER_STDIO, SANDBOX_PATH, type Sandbox } from '../../../src/server/sandbox/index.js';
import { testSandboxes } from '../../helpers/sandbox.js';

const boxes = testSandboxes('prepared');

async function sandbox(): Promise<Sandbox> {
  const box = await boxes.sandbox();
  expect(box.mode).toBe('isolated');
  return box;
}

/** Pids of the sandbox's processes waiting as the launch step. */
function waiting(box: Sandbox): number[] {
  return box.pids().filter((pid) => {
    try {
      const argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
      return argv[0] === '/usr/bin/perl' && argv[2]?.includes('BURROW_INSTANCE');
    } catch {
      return false;
    }
  });
}

function text(stream: Readable | null): Promise<string> {
  return new Promise((resolve) => {
    let out = '';
    stream!.on('data', (d: Buffer) => (out += d.toString()));
    stream!.on('end', () => resolve(out));
  });
}

async function until(cond: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('Sandbox.prepareSpawn', () => {
  it('becomes the first command of its shape, with exactly its arguments and environment', async () => {
    const box = await sandbox();
    box.prepareSpawn(['ignore', 'pipe', 'pipe']);
    await until(() => waiting(box).length === 1, 'the launch step');
    const [launcher] = waiting(box);
    expect(box.fresh).toBe(true);
    // its pid inside the instance's pid namespace (the last of NSpid)
    const nspid = readFileSync(`/proc/${launcher}/status`, 'utf8')
      .match(/^NSpid:\s+(.*)$/m)![1]!
      .trim()
      .split(/\s+/)
      .at(-1);

    const script =
      'printf "%s|" "$#" "$@"; echo; env | sort; ls /proc/self/fd | tr "\\n" " "; echo; echo $$';
    const args = ['a b', '', '$(touch /tmp/x) ; `id`', "it's"];
    const proc = box.spawn(['/bin/sh', '-c', script, 'burrow-test', ...args], {
      env: { PATH: SANDBOX_PATH, GREETING: 'hello  world', EMPTY: '' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const [out, err] = await Promise.all([text(proc.child.stdout), text(proc.child.stderr)]);
    const exit = await proc.exited;
    expect(err).toBe('');
    expect(exit.code).toBe(0);
    const [argLine, ...rest] = out.trimEnd().split('\n');
    expect(argLine).toBe(`4|${args.join('|')}|`);
    const env = rest.slice(0, -2);
    // what was given, bubblewrap's instance name, and what sh itself sets: nothing else
    expect(env.filter((l) => !/^(PWD|SHLVL|_)=/.test(l))).toEqual([
      'BURROW_INSTANCE=' + box.name,
      'EMPTY=',
      'GREETING=hello  world',
      `PATH=${SANDBOX_PATH}`,
    ]);
    // stdin, stdout, stderr and the descriptor ls opened: the launch step's own is closed
    expect(rest.at(-2)!.trim().split(' ').map(Number).sort()).toEqual([0, 1, 2, 3]);
    // the process started ahead is the one that ran it: the same pid inside the instance
    expect(rest.at(-1)).toBe(nspid);
  });

  it('a first command of another shape ends it unused and runs as usual', async () => {
    const box = await sandbox();
    box.prepareSpawn(BROWSER_STDIO);
    await until(() => waiting(box).length === 1, 'the launch step');
    const r = await box.exec(['/bin/echo', 'plain'], {
      env: { PATH: SANDBOX_PATH },
      timeoutMs: 10_000,
    });
    expect({ out: r.stdout.toString(), err: r.stderr.toString(), code: r.code }).toEqual({
      out: 'plain\n',
      err: '',
      code: 0,
    });
    await until(() => waiting(box).length === 0, 'the unused launch step to end');
  });

  it('a command with a NUL in it is refused, as a spawn refuses it, and the step ends', async () => {
    const box = await sandbox();
    box.prepareSpawn(['ignore', 'pipe', 'pipe']);
    await until(() => waiting(box).length === 1, 'the launch step');
    expect(() =>
      box.spawn(['/bin/echo', 'a\0b'], {
        env: { PATH: SANDBOX_PATH },
        stdio: ['ignore', 'pipe', 'pipe'],
      }),
    ).toThrow('NUL');
    await until(() => waiting(box).length === 0, 'the unused launch step to end');
  });

  it('a stop ends one never used', async () => {
    const box = await sandbox();
    box.prepareSpawn(BROWSER_STDIO);
    await until(() => waiting(box).length === 1, 'the launch step');
    const [launcher] = waiting(box);
    await box.stop();
    // gone, not even a zombie
    expect(() => readFileSync(`/proc/${launcher}/status`)).toThrow();
  });
});
