/**
 * An attacker in a process of its own, spawned before the test starts watching the server and
 * let go once it watches.
 *
 * The server runs in the test's process, and spawning a child there holds its main thread while
 * the kernel copies the process's page tables: 35 ms at 745 MiB of RSS on an idle machine here,
 * 100–200 ms on a loaded one. A test that spawned its attacker after `watchLivez` charged that
 * to the server under test; spawned first, the attacker loads its modules and waits for a line
 * on its stdin; stdin is then paused (a script that reads what the test writes later resumes it).
 */
import { spawn, type ChildProcessByStdio } from 'node:child_process';
import { once } from 'node:events';
import type { Readable, Writable } from 'node:stream';

export interface Attacker {
  child: ChildProcessByStdio<Writable, Readable, null>;
  /** Lets the script run. */
  go(): void;
  /** What it printed so far. */
  output(): string;
  /** Resolves with what it printed once it exited. */
  exited: Promise<string>;
}

/**
 * Spawns `node` on the ES module `script` (with `args`, and `env` over the test's environment),
 * which starts once `go()` is called. Its stderr goes to the test's.
 */
export function attacker(
  script: string,
  { env = {}, args = [] }: { env?: Record<string, string>; args?: string[] } = {},
): Attacker {
  // once let go, stdin is paused again, so that it does not keep the script from exiting
  const held = `await new Promise((r) => process.stdin.once('data', r));\nprocess.stdin.pause();\n${script}`;
  const child = spawn(process.execPath, ['--input-type=module', '-e', held, ...args], {
    env: { ...process.env, ...env },
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  const exited = once(child, 'exit').then(() => out);
  return { child, go: () => void child.stdin.write('go\n'), output: () => out, exited };
}
