/**
 * Connecting to a Unix socket of an instance without following a path it controls: the server
 * is root, and a socket on the instance's disk can be swapped for a link to any host socket. A
 * small Python relay started inside (the instance's user, mount and network namespaces, like any
 * of its processes) connects by the path as the instance sees it, so a planted link leads only
 * where the instance could connect itself, and then copies bytes between the socket and its
 * stdin/stdout. The server reads nothing from it but those bytes and a bounded status line:
 * the relay is the instance's own process (it can rewrite its memory through /proc), so no
 * channel that carries descriptors or messages of the server's runtime is ever opened to it.
 */
import { readFileSync } from 'node:fs';
import { posix } from 'node:path';
import { Duplex, type Readable, type Writable } from 'node:stream';
import { raceDeadline, TIMED_OUT } from '../../internal/deadline.js';
import type { Supervised } from '../../internal/process.js';
import { SANDBOX_PATH } from './rootfs.js';
import type { SandboxSpawn } from './sandbox.js';

/** What connecting needs of the sandbox (`Sandbox` has it). */
export interface ConnectSandbox {
  spawn: SandboxSpawn;
  /** HOME as seen inside. */
  readonly home: string;
}

/** How long the relay may take to start and connect, by default, in ms. */
export const CONNECT_INSIDE_TIMEOUT_MS = 10_000;
/** Bytes of the relay's status output read; past them it is killed. */
const STDERR_BYTES = 1024;
/** Debian's Python, which every ubuntu instance has (the toolbox and the kernels run on it). */
const PYTHON = '/usr/bin/python3';

let relaySource: string | undefined;
const relay = () => (relaySource ??= readFileSync(new URL('./relay.py', import.meta.url), 'utf8'));

/**
 * A stream connected to the Unix socket at `path` (absolute, as seen inside the instance),
 * through a relay inside. Rejects with the reason (e.g. `connect No such file or directory
 * /tmp/x.sock`) when the relay cannot connect, or when it has not within `timeoutMs` (a paused
 * instance, say). Destroying the stream kills the relay.
 */
export async function connectInside(
  box: ConnectSandbox,
  path: string,
  timeoutMs = CONNECT_INSIDE_TIMEOUT_MS,
): Promise<Duplex> {
  if (!posix.isAbsolute(path)) throw new Error(`not an absolute path: ${path}`);
  const fail = (reason: string) =>
    new Error(`cannot connect to ${path} inside the instance: ${reason}`);
  const proc = box.spawn([PYTHON, '-I', '-S', '-c', relay(), path], {
    env: { PATH: SANDBOX_PATH, HOME: box.home },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  const { child } = proc;
  let status = '';
  const connected = new Promise<true | Error>((resolve) => {
    child.stderr?.setEncoding('utf8');
    child.stderr?.on('data', (text: string) => {
      status += text;
      if (status.startsWith('connected\n')) return resolve(true);
      if (status.length > STDERR_BYTES) {
        void proc.kill(0);
        resolve(fail('the relay said too much'));
      }
    });
    child.once('close', (code, signal) => {
      resolve(
        fail(
          status.trim().slice(0, STDERR_BYTES) ||
            `the relay exited (${signal ?? `status ${code}`})`,
        ),
      );
    });
  });
  const outcome = await raceDeadline(connected, timeoutMs);
  if (outcome === true) return new RelayStream(proc);
  void proc.kill(0);
  throw outcome === TIMED_OUT ? fail(`no answer within ${timeoutMs} ms`) : outcome;
}

/** The relay's stdout and stdin as one stream; its end kills the relay. */
class RelayStream extends Duplex {
  readonly #proc: Supervised;
  readonly #out: Readable;
  readonly #in: Writable;

  constructor(proc: Supervised) {
    super();
    this.#proc = proc;
    this.#out = proc.child.stdout!;
    this.#in = proc.child.stdin!;
    this.#out.on('data', (chunk: Buffer) => {
      if (!this.push(chunk)) this.#out.pause();
    });
    this.#out.once('end', () => this.push(null));
    this.#out.on('error', (err) => this.destroy(err));
    this.#in.on('error', (err) => this.destroy(err));
    // what the relay says once connected is not read, so it cannot make the server hold it
    proc.child.stderr?.removeAllListeners('data');
    proc.child.stderr?.resume();
    void proc.exited.then(() => {
      if (!this.#out.readableEnded) this.push(null);
    });
  }

  override _read(): void {
    this.#out.resume();
  }

  override _write(
    chunk: Buffer,
    _encoding: BufferEncoding,
    done: (err?: Error | null) => void,
  ): void {
    this.#in.write(chunk, done);
  }

  override _final(done: (err?: Error | null) => void): void {
    this.#in.end(() => done());
  }

  override _destroy(err: Error | null, done: (err?: Error | null) => void): void {
    void this.#proc.kill(0);
    done(err);
  }
}
