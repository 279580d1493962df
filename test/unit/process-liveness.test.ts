/**
 * `pidAlive` and `signalQuietly` (src/internal/process.ts) on real processes: a `sleep` that runs,
 * is signalled and reaped; a zombie nobody reaps; and EPERM made real by asking as another user
 * (`setpriv` to nobody) about this test's own process.
 */
import { execFile, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { once } from 'node:events';
import { promisify } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';
import { until } from '../../src/internal/deadline.js';
import { pidAlive, processState, signalQuietly } from '../../src/internal/process.js';

const children: ReturnType<typeof spawn>[] = [];
afterEach(() => {
  for (const child of children.splice(0)) child.kill('SIGKILL');
});

function start(command: string, args: string[]) {
  const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'ignore'] });
  children.push(child);
  return child;
}

describe('pidAlive', () => {
  it('is true while a process runs and false once it has exited and been reaped', async () => {
    const child = start('sleep', ['60']);
    expect(pidAlive(child.pid!)).toBe(true);
    child.kill('SIGKILL');
    await once(child, 'exit'); // node has reaped it
    expect(pidAlive(child.pid!)).toBe(false);
  });

  it('is false for a zombie (exited, not reaped), which kill(pid, 0) still finds', async () => {
    // sh starts a short sleep, then becomes a long one that never waits for it (the short one
    // outlives the exec: one that ended before it could be reaped by the shell itself)
    const child = start('sh', ['-c', 'sleep 1 & echo $!; exec sleep 60']);
    const [line] = (await once(child.stdout!, 'data')) as [Buffer];
    const zombie = Number(line.toString().trim());
    expect(
      await until(() => processState(zombie) === 'Z', { timeoutMs: 5000, intervalMs: 5 }),
    ).toBe(true);
    expect(process.kill(zombie, 0)).toBe(true);
    expect(pidAlive(zombie)).toBe(false);
  });

  it('is false for numbers that name no single process', () => {
    for (const pid of [0, -1, -process.pid, 1.5, Number.NaN, Infinity]) {
      expect(pidAlive(pid), String(pid)).toBe(false);
    }
    expect(pidAlive(process.pid)).toBe(true);
  });
});

describe('signalQuietly', () => {
  it('delivers to a live process and says so; false once it is gone', async () => {
    const child = start('sleep', ['60']);
    expect(signalQuietly(child.pid!, 'SIGTERM')).toBe(true);
    const [, signal] = (await once(child, 'exit')) as [number | null, string | null];
    expect(signal).toBe('SIGTERM');
    expect(signalQuietly(child.pid!, 'SIGTERM')).toBe(false); // ESRCH, not thrown
  });

  it('signals a process group by a negative number', async () => {
    const child = spawn('sleep', ['60'], { stdio: 'ignore', detached: true });
    children.push(child);
    expect(signalQuietly(-child.pid!, 'SIGKILL')).toBe(true);
    const [, signal] = (await once(child, 'exit')) as [number | null, string | null];
    expect(signal).toBe('SIGKILL');
  });

  it('throws what is not about the process (an unknown signal)', () => {
    expect(() => signalQuietly(process.pid, 'SIGNOPE' as NodeJS.Signals)).toThrow();
  });
});

// EPERM needs a process this one may not signal: as root every process may be signalled, so the
// question is asked by a child running as nobody, about this (root's) process. With signal 0:
// SIGCONT would pass (the kernel lets it through within a session whatever the user), and a
// signal that did get through would end this test's worker.
const asNobody = process.getuid?.() === 0 && existsSync('/usr/bin/setpriv');
describe.skipIf(!asNobody)("EPERM: another user's process", () => {
  it('is alive to pidAlive, and not delivered for signalQuietly', async () => {
    const script = [
      `import { pidAlive, signalQuietly } from ${JSON.stringify(new URL('../../src/internal/process.ts', import.meta.url).pathname)};`,
      `let eperm = '';`,
      `try { process.kill(${process.pid}, 0); } catch (err) { eperm = err.code; }`,
      `console.log(JSON.stringify({ eperm, alive: pidAlive(${process.pid}), sent: signalQuietly(${process.pid}, 0) }));`,
    ].join('\n');
    const tsx = new URL('../../node_modules/tsx/dist/cli.mjs', import.meta.url).pathname;
    const { stdout } = await promisify(execFile)(
      '/usr/bin/setpriv',
      ['--reuid=65534', '--regid=65534', '--clear-groups', process.execPath, tsx, '-e', script],
      { env: { PATH: process.env.PATH, HOME: '/tmp' }, timeout: 30_000 },
    );
    expect(JSON.parse(stdout)).toEqual({ eperm: 'EPERM', alive: true, sent: false });
  }, 40_000);
});
