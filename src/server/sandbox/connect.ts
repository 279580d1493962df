/**
 * Connecting to a Unix socket of an instance without following a path it controls: the server
 * is root, and a socket on the instance's disk can be swapped for a link to any host socket. A
 * tiny Node helper started inside (the instance's user, mount and network namespaces, like any of
 * its processes) connects by the path as the instance sees it and sends the connected socket back
 * over its IPC channel, as `Sandbox.listen` does for a listener. A planted link then resolves in
 * the instance's own view: it leads only where the instance could connect itself.
 */
import type { StdioOptions } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { Socket } from 'node:net';
import { posix } from 'node:path';
import { background } from '../../internal/background.js';
import { raceDeadline, TIMED_OUT } from '../../internal/deadline.js';
import type { Supervised } from '../../internal/process.js';
import { SANDBOX_PATH } from './rootfs.js';

/** What connecting needs of the sandbox (`Sandbox` has it). */
export interface ConnectSandbox {
  spawn(argv: string[], opts: { env: Record<string, string>; stdio: StdioOptions }): Supervised;
  /** HOME as seen inside. */
  readonly home: string;
}

/** How long the helper may take to start and connect, by default, in ms. */
export const CONNECT_INSIDE_TIMEOUT_MS = 10_000;
/** Bytes of the helper's error output kept for the error message. */
const STDERR_BYTES = 1024;

let helperSource: string | undefined;
const helper = () =>
  (helperSource ??= readFileSync(new URL('./connect-helper.mjs', import.meta.url), 'utf8'));

/**
 * A socket connected to the Unix socket at `path` (absolute, as seen inside the instance), made
 * from inside. Rejects with the reason (e.g. `connect ENOENT /tmp/x.sock`) when the helper cannot
 * connect, or when it has not within `timeoutMs` (a paused instance, say).
 */
export async function connectInside(
  box: ConnectSandbox,
  path: string,
  timeoutMs = CONNECT_INSIDE_TIMEOUT_MS,
): Promise<Socket> {
  if (!posix.isAbsolute(path)) throw new Error(`not an absolute path: ${path}`);
  const fail = (reason: string) =>
    new Error(`cannot connect to ${path} inside the instance: ${reason}`);
  const proc = box.spawn(
    [
      process.execPath,
      '--input-type=module',
      '-e',
      helper(),
      '--',
      path,
      // the helper's own deadline, a little later than ours: it never outlives a failed wait long
      String(timeoutMs + 1000),
    ],
    { env: { PATH: SANDBOX_PATH, HOME: box.home }, stdio: ['ignore', 'ignore', 'pipe', 'ipc'] },
  );
  const { child } = proc;
  let stderr = '';
  child.stderr?.on('data', (c: Buffer) => {
    if (stderr.length < STDERR_BYTES) stderr += c.toString('utf8', 0, STDERR_BYTES);
  });
  let decided = false;
  const received = new Promise<Socket | Error>((resolve) => {
    child.on('message', (msg: unknown, handle: unknown) => {
      // after the wait, or a second message (only a copy of the channel sends one): not used
      if (decided) return void (handle instanceof Socket && handle.destroy());
      decided = true;
      if (msg === 'connected' && handle instanceof Socket) resolve(handle);
      else {
        if (handle instanceof Socket) handle.destroy();
        resolve(fail('the helper sent no socket'));
      }
    });
    // 'close': its error output has been read by then
    child.once('close', (code, signal) => {
      const text = stderr.slice(0, STDERR_BYTES).trim();
      resolve(fail(text || `the helper exited (${signal ?? `status ${code}`})`));
    });
  });
  const outcome = await raceDeadline(received, timeoutMs);
  decided = true;
  if (child.connected) child.disconnect(); // the helper exits once the channel is closed
  if (outcome instanceof Socket) return background(outcome);
  void proc.kill(0);
  throw outcome === TIMED_OUT ? fail(`no answer within ${timeoutMs} ms`) : outcome;
}
