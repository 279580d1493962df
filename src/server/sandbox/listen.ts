/**
 * TCP listeners on `127.0.0.1:port` inside an instance's network namespace, handed to the server:
 * how the egress proxy serves an instance that has no route out. A perl step on the root side of
 * a chain (`LISTEN_STEP`) joins that namespace alone (nothing of the instance's file system, uid
 * or processes; how it gets there is its level's: `NetworkEntry`, space/), opens the socket and
 * sends it over the Node IPC channel of its spawn, then exits. Connections the instance makes to
 * it arrive in the server process. No process of the instance holds the channel at any time, and
 * the step starts in a few ms (a Node helper inside the instance took hundreds under load).
 */
import { Server as NetServer, type Server } from 'node:net';
import { TIMED_OUT, raceDeadline } from '../../internal/deadline.js';
import { background } from '../../internal/background.js';
import type { Supervised } from '../../internal/process.js';
import { describeExit, keepTail } from './exit.js';
import type { NetworkEntry } from './space/index.js';

/**
 * The listen step, on the root side of a chain after its first step: join the namespaces whose
 * descriptors are named (`setns`), open a TCP listener on 127.0.0.1:port there (non-blocking,
 * `SO_REUSEADDR`, as Node opens its own), send it to the server over the Node IPC channel (one
 * JSON line and the descriptor: Node's own handle message for a `net.Server`), then wait for the
 * server to close the channel, so that its exit never comes before the message. Built-ins and
 * `syscall` only: no module to load. The structures are those of 64-bit Linux.
 * Arguments: the setns and sendmsg numbers, the channel's descriptor, the port, the namespaces.
 */
export const LISTEN_STEP =
  'my ($setns, $sendmsg, $ipc, $port, @ns) = @ARGV; ' +
  'for my $fd (@ns) { syscall(0 + $setns, 0 + $fd, 0) == 0 or die "setns: $!\\n" } ' +
  'socket(my $s, 2, 1, 0) or die "socket: $!\\n"; ' +
  'setsockopt($s, 1, 2, pack("i", 1)) or die "setsockopt: $!\\n"; ' +
  'bind($s, pack("S n C4 x8", 2, $port, 127, 0, 0, 1)) or die "bind 127.0.0.1:$port: $!\\n"; ' +
  'listen($s, 511) or die "listen: $!\\n"; ' +
  'fcntl($s, 4, 0x800) or die "fcntl: $!\\n"; ' +
  'my $line = qq({"cmd":"NODE_HANDLE","type":"net.Server","msg":"listening"}\\n); ' +
  'my $iov = pack("P Q", $line, length $line); ' +
  'my $cmsg = pack("Q i i i x4", 20, 1, 1, fileno $s); ' +
  'my $msg = pack("Q L x4 P Q P Q i x4", 0, 0, $iov, 1, $cmsg, 24, 0); ' +
  'syscall(0 + $sendmsg, 0 + $ipc, $msg, 0) == length $line or die "sendmsg: $!\\n"; ' +
  'close($s); open(my $ch, "<&=", 0 + $ipc) or exit 0; 1 while sysread($ch, my $ack, 4096); exit 0';

/** The system call numbers the listen step needs, by Node's name of the architecture. */
const LISTEN_SYSCALLS: Readonly<Record<string, { setns: number; sendmsg: number }>> = {
  x64: { setns: 308, sendmsg: 46 },
  arm64: { setns: 268, sendmsg: 211 },
};

/** How long the listen step has to send its socket. */
const LISTEN_MS = 15_000;

/** What the listeners of one sandbox use of it. */
export interface ListenerOptions {
  /** The instance's network namespace; undefined: it has none (`none` mode). */
  network: NetworkEntry | undefined;
  /** Track the listen step as a process of the sandbox's own (killed with it). */
  track(proc: Supervised): void;
  /** Whether the sandbox is stopping (no listener opened then). */
  stopping(): boolean;
}

/** The listeners of one sandbox: opened on demand, or ahead for a `listen` to come to take. */
export class Listeners {
  readonly #opts: ListenerOptions;
  /** Listeners opened ahead (`listenAhead`) for the `listen` of their port to take. */
  readonly #ahead = new Map<number, Promise<Server>>();

  constructor(opts: ListenerOptions) {
    this.#opts = opts;
  }

  /** A listener on `127.0.0.1:port` inside: the one opened ahead for it, or a new one. */
  async listen(port: number): Promise<Server> {
    const network = this.#opts.network;
    if (!network) throw new Error('no network namespace in none mode');
    if (this.#opts.stopping()) throw new Error('sandbox is stopping');
    const ahead = this.#ahead.get(port);
    if (ahead) {
      this.#ahead.delete(port);
      return ahead;
    }
    return this.#open(network, port);
  }

  /**
   * Open the listener of `port` now, for the `listen(port)` to come to take (a sandbox made
   * ahead: stock.ts). Until then nothing inside runs that could connect to it; a sandbox that
   * stops first closes it.
   */
  async listenAhead(port: number): Promise<void> {
    const network = this.#opts.network;
    if (!network || this.#ahead.has(port)) return;
    const opening = this.#open(network, port);
    this.#ahead.set(port, opening);
    opening.catch(() => this.#ahead.delete(port));
    await opening;
  }

  /** Close every listener opened ahead and not taken (the sandbox stops). */
  closeAhead(): void {
    for (const opening of this.#ahead.values())
      void opening.then(
        (l) => l.close(),
        () => {},
      );
    this.#ahead.clear();
  }

  async #open(network: NetworkEntry, port: number): Promise<Server> {
    const calls = LISTEN_SYSCALLS[process.arch];
    if (!calls) throw new Error(`no listen step for ${process.arch}`);
    const proc = network.enter(['ignore', 'ignore', 'pipe', 'ipc'], (namespaces, tools) => [
      tools.perl,
      '-e',
      LISTEN_STEP,
      String(calls.setns),
      String(calls.sendmsg),
      '3',
      String(port),
      ...namespaces.map(String),
    ]);
    this.#opts.track(proc);
    let stderr = '';
    proc.child.stderr?.on('data', (c: Buffer) => (stderr = keepTail(stderr, c)));
    const handed = new Promise<Server | Error>((resolve) => {
      proc.child.once('message', (_msg, handle) =>
        resolve(handle instanceof NetServer ? handle : new Error('no socket in its message')),
      );
      void proc.exited.then((e) =>
        resolve(new Error(stderr.trim() || `the listen step exited (${describeExit(e)})`)),
      );
    });
    const outcome = await raceDeadline(handed, LISTEN_MS, { unref: true });
    const server = outcome === TIMED_OUT ? new Error('the listen step timed out') : outcome;
    if (server instanceof Error) {
      await proc.kill(0);
      throw new Error(`could not open port ${port} inside the instance: ${server.message}`);
    }
    proc.child.disconnect?.();
    return background(server);
  }
}
