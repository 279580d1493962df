/**
 * The live view of an ubuntu instance: an x11vnc server on the instance's display, started on
 * the first `stream_url` and bridged to WebSocket viewers (noVNC) behind the server's token.
 *
 * x11vnc listens on 127.0.0.1 only, on a port it picks itself (`-autoport`, read from its
 * `PORT=` line), and asks for a random VNC password: other local processes (other instances
 * share the loopback interface) cannot watch or drive the display; the password reaches only
 * the token-protected live-view page. It reads the password from a file it deletes at once
 * (`-passwdfile rm:`), or in an instance from its stdin, so the password never appears in a
 * command line.
 *
 * In an instance, x11vnc listens on a Unix socket in the instance's /tmp: a path the instance
 * controls, so the server connects to it from inside (`connectInside`), one helper per viewer.
 */
import { randomBytes } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { join, posix } from 'node:path';
import type { Duplex, Readable } from 'node:stream';
import { WebSocketServer, type WebSocket } from 'ws';
import { connectWithDeadline } from '../../internal/connect.js';
import { raceDeadline, TIMED_OUT } from '../../internal/deadline.js';
import { LineDecoder } from '../../internal/lines.js';
import { writeFileAtomic } from '../../internal/fs.js';
import { Supervised } from '../../internal/process.js';
import { DEFAULT_PROGRAMS } from '../config.js';
import { refuseUpgrade, serverError } from '../errors.js';
import type { Logger } from '../instances/runtime.js';
import type { SandboxSpawn } from '../sandbox/index.js';
import { unmaskAsReceived } from '../chromium/unmask.js';

export interface VncOptions {
  /** Environment naming the display for a client on the host: `DISPLAY`, `XAUTHORITY`. */
  displayEnv: Readonly<Record<string, string>>;
  /** A server-only directory of the instance (not visible inside the sandbox). */
  runDir: string;
  log: Logger;
  /** x11vnc binary. Default `/usr/bin/x11vnc` (the server's `x11vncPath`, src/server/config.ts). */
  x11vnc?: string;
  /** How long x11vnc may take to listen, in ms. Default 15 000. */
  startTimeoutMs?: number;
  /**
   * Run x11vnc inside the instance, as its user, listening on a Unix socket in its /tmp: it
   * parses replies of an X server the instance controls. `displayEnv` then names the display as
   * the instance sees it. Without it x11vnc is a child of the server on 127.0.0.1 (no-isolation
   * mode).
   */
  sandbox?: {
    spawn: SandboxSpawn;
    /** The instance's /tmp as seen inside. */
    tmp: string;
    /** A stream to the Unix socket at `path` as seen inside, connected from inside. */
    connect(path: string): Promise<Duplex>;
  };
}

/** x11vnc options both ways of running it share: no remote control, no clipboard, no extras. */
const X11VNC_FLAGS = [
  '-shared',
  '-forever',
  '-norc',
  '-nocmds',
  '-noremote',
  '-nosel',
  '-noxrecord',
  '-nowf',
  '-nobell',
  '-cursor',
  'arrow',
  '-wait',
  '10',
  '-defer',
  '10',
];

/** Bytes queued towards one viewer before the VNC side is paused. */
const HIGH_WATER = 4 * 1024 * 1024;
/** Longest message a viewer sends (RFB client messages are short; a clipboard text is the most). */
const VIEWER_MAX_PAYLOAD = 1024 * 1024;
const CONNECT_TIMEOUT_MS = 5_000;
/** Longest line of x11vnc's output kept (the rest of a longer line is dropped). */
const MAX_LINE = 1024;

interface Running {
  proc: Supervised;
  /** TCP port on 127.0.0.1, or the path of x11vnc's Unix socket as seen inside the instance. */
  port: number | string;
}

export class VncServer {
  /** The VNC password (8 characters: VNC authentication uses no more). */
  readonly password = randomBytes(6).toString('base64url');
  readonly #opts: VncOptions;
  readonly #wss = new WebSocketServer({
    noServer: true,
    perMessageDeflate: false,
    maxPayload: VIEWER_MAX_PAYLOAD,
    handleProtocols: (protocols) => (protocols.has('binary') ? 'binary' : false),
  });
  readonly #bridges = new Set<{ ws?: WebSocket; tcp: Duplex }>();
  #running: Promise<Running> | undefined;
  #paused = false;
  #stopped = false;

  constructor(opts: VncOptions) {
    this.#opts = opts;
  }

  /** Start x11vnc unless it runs; resolves with its port (or socket path). */
  ensure(): Promise<number | string> {
    if (this.#stopped) return Promise.reject(new Error('The live view is stopped'));
    const running = (this.#running ??= this.#start());
    running.catch(() => {
      if (this.#running === running) this.#running = undefined;
    });
    return running.then((r) => r.port);
  }

  /** Bridge a viewer WebSocket (token already checked) to x11vnc. */
  upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    socket.on('error', () => socket.destroy());
    void this.#bridge(req, socket, head).catch((err: unknown) => {
      this.#opts.log.warn({ err }, 'live view connection failed');
      refuseUpgrade(socket, serverError('live_view_failed'));
    });
  }

  /** SIGSTOP / SIGCONT x11vnc with the rest of the instance. */
  async pause(): Promise<void> {
    this.#paused = true;
    const r = await this.#settled();
    r?.proc.signalGroup('SIGSTOP');
  }

  async resume(): Promise<void> {
    this.#paused = false;
    const r = await this.#settled();
    r?.proc.signalGroup('SIGCONT');
  }

  /** Close every viewer and stop x11vnc (TERM, then KILL). Idempotent. */
  async stop(): Promise<void> {
    this.#stopped = true;
    for (const b of this.#bridges) {
      b.ws?.terminate();
      b.tcp.destroy();
    }
    this.#bridges.clear();
    const r = await this.#settled();
    await r?.proc.kill(1000);
  }

  /** The running x11vnc, if one started (or is starting and will start). */
  async #settled(): Promise<Running | undefined> {
    return this.#running?.catch(() => undefined);
  }

  async #start(): Promise<Running> {
    if (this.#opts.sandbox) return this.#startInside(this.#opts.sandbox);
    const { displayEnv, runDir } = this.#opts;
    const passwdFile = join(runDir, `vncpasswd-${randomBytes(6).toString('hex')}`);
    await writeFileAtomic(passwdFile, `${this.password}\n`);
    const args = [
      '-display',
      displayEnv.DISPLAY ?? ':0',
      ...(displayEnv.XAUTHORITY ? ['-auth', displayEnv.XAUTHORITY] : []),
      '-localhost',
      '-noipv6',
      '-autoport',
      '5900',
      '-passwdfile',
      `rm:${passwdFile}`,
      ...X11VNC_FLAGS,
    ];
    const env = { PATH: '/usr/bin:/bin', HOME: runDir, ...displayEnv };
    const proc = new Supervised(this.#opts.x11vnc ?? DEFAULT_PROGRAMS.x11vnc, args, {
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const tail = keepTail(proc.child.stderr);
    // the port x11vnc says it listens on, or how it exited before it said
    const port = new Promise<number | Error>((resolve) => {
      onLines(proc.child.stdout, (line) => {
        const m = /^PORT=(\d+)$/.exec(line.trim());
        if (m) resolve(Number(m[1]));
      });
      void proc.exited.then((e) =>
        resolve(new Error(`x11vnc exited (${e.signal ?? `status ${e.code}`})`)),
      );
    });
    const timeoutMs = this.#opts.startTimeoutMs ?? 15_000;
    const outcome = await raceDeadline(port, timeoutMs);
    if (outcome === TIMED_OUT || outcome instanceof Error) {
      const reason =
        outcome === TIMED_OUT ? `x11vnc did not listen within ${timeoutMs} ms` : outcome.message;
      await proc.kill(500);
      const last = tail
        .filter((l) => l.trim())
        .slice(-5)
        .join(' | ');
      throw new Error(last ? `${reason}: ${last}` : reason);
    }
    return this.#watch(proc, outcome, tail);
  }

  /**
   * x11vnc inside the instance on a Unix socket in its /tmp; resolves once x11vnc says it listens
   * there (the socket is not looked at from the host: the instance owns its /tmp).
   */
  async #startInside(box: NonNullable<VncOptions['sandbox']>): Promise<Running> {
    const { displayEnv } = this.#opts;
    const inside = posix.join(box.tmp, `.burrow-vnc-${randomBytes(6).toString('hex')}.sock`);
    const passwdFile = posix.join(box.tmp, `.burrow-vnc-${randomBytes(6).toString('hex')}.pw`);
    const proc = box.spawn(
      [
        // the password comes on stdin into a file of the instance's own /tmp (0600), which x11vnc
        // deletes once read (rm:): never in a command line, which every user of the host reads
        // (/proc/N/cmdline); read and printf are the shell's own, and exec keeps the process
        '/bin/sh',
        '-c',
        'umask 077 && IFS= read -r p && printf "%s\\n" "$p" > "$1" && shift && exec "$@"',
        'burrow-vnc',
        passwdFile,
        this.#opts.x11vnc ?? DEFAULT_PROGRAMS.x11vnc,
        '-display',
        displayEnv.DISPLAY ?? ':0',
        ...(displayEnv.XAUTHORITY ? ['-auth', displayEnv.XAUTHORITY] : []),
        '-rfbport',
        '0',
        '-unixsock',
        inside,
        // the password is visible to the instance's own processes, which see the screen anyway
        '-passwdfile',
        `rm:${passwdFile}`,
        ...X11VNC_FLAGS,
      ],
      { env: { ...displayEnv }, stdio: ['pipe', 'ignore', 'pipe'] },
    );
    proc.child.stdin?.on('error', () => {}); // gone before reading: its exit says why
    proc.child.stdin?.end(`${this.password}\n`);
    // x11vnc's words only: a process of the instance could write them too, which would make
    // the first viewer's connection fail, nothing more
    const listening = `listening on unix socket: ${inside} `;
    // true once x11vnc says it listens; false if it exits before
    const ready = new Promise<boolean>((resolve) => {
      onLines(proc.child.stderr, (line) => {
        if (line.includes(listening)) resolve(true);
      });
      void proc.exited.then(() => resolve(false));
    });
    const tail = keepTail(proc.child.stderr);
    const outcome = await raceDeadline(ready, this.#opts.startTimeoutMs ?? 15_000);
    if (outcome !== true) {
      await proc.kill(500);
      const last = tail
        .filter((l) => l.trim())
        .slice(-5)
        .join(' | ');
      throw new Error(`x11vnc did not start${last ? `: ${last}` : ''}`);
    }
    return this.#watch(proc, inside, tail);
  }

  /** A started x11vnc: paused if the instance is, forgotten (and its viewers closed) when it exits. */
  #watch(proc: Supervised, port: number | string, tail: string[]): Running {
    if (this.#paused) proc.signalGroup('SIGSTOP');
    const running: Running = { proc, port };
    void proc.exited.then((e) => {
      if (this.#stopped) return;
      this.#opts.log.warn(
        { exit: e, stderr: tail.join('\n') },
        'x11vnc exited; the next viewer restarts it',
      );
      if (this.#running) {
        void this.#running.then((r) => {
          if (r === running) this.#running = undefined;
        });
      }
      for (const b of this.#bridges) b.ws?.close(1011, 'VNC server exited');
    });
    return running;
  }

  async #bridge(req: IncomingMessage, socket: Duplex, head: Buffer): Promise<void> {
    const port = await this.ensure();
    // a frozen instance would freeze the helper that connects inside
    if (this.#paused) throw new Error('the instance is paused');
    const box = this.#opts.sandbox;
    const tcp =
      typeof port === 'string' && box
        ? await box.connect(port)
        : await connectWithDeadline(
            { host: '127.0.0.1', port: Number(port) },
            CONNECT_TIMEOUT_MS,
            () => new Error('connecting to x11vnc timed out'),
          );
    const bridge: { ws?: WebSocket; tcp: Duplex } = { tcp };
    this.#bridges.add(bridge);
    tcp.on('error', () => tcp.destroy());
    tcp.once('close', () => {
      this.#bridges.delete(bridge);
      bridge.ws?.close();
    });
    if (this.#stopped || socket.destroyed) {
      tcp.destroy();
      return;
    }
    tcp.pause();
    this.#wss.handleUpgrade(req, socket, head, (ws) => {
      // frames unmasked as they come, pieces of a message copied and charged (chromium/unmask.ts)
      unmaskAsReceived(ws, VIEWER_MAX_PAYLOAD);
      bridge.ws = ws;
      if (tcp.destroyed) return ws.close(1011, 'VNC server closed the connection');
      let queued = 0;
      tcp.on('data', (chunk) => {
        queued += chunk.length;
        if (queued > HIGH_WATER) tcp.pause();
        ws.send(chunk, { binary: true }, () => {
          queued -= chunk.length;
          if (queued <= HIGH_WATER && tcp.isPaused() && !tcp.destroyed) tcp.resume();
        });
      });
      tcp.resume();
      ws.on('message', (data: Buffer | ArrayBuffer | Buffer[]) => {
        const buf = Array.isArray(data)
          ? Buffer.concat(data)
          : Buffer.isBuffer(data)
            ? data
            : Buffer.from(data);
        if (!tcp.write(buf)) {
          ws.pause();
          tcp.once('drain', () => ws.resume());
        }
      });
      ws.on('error', () => ws.terminate());
      ws.once('close', () => tcp.destroy());
    });
  }
}

/** Calls `onLine` for each line of `stream`, each cut to MAX_LINE bytes (src/internal/lines.ts). */
function onLines(stream: Readable | null, onLine: (line: string) => void): void {
  const lines = new LineDecoder({ maxBytes: MAX_LINE, overflow: 'truncate' });
  stream?.on('data', (chunk: Buffer) => lines.push(chunk).forEach(onLine));
}

/** The last 15 lines of `stream`, kept up to date. */
function keepTail(stream: Readable | null): string[] {
  const tail: string[] = [];
  onLines(stream, (line) => {
    tail.push(line);
    if (tail.length > 15) tail.shift();
  });
  return tail;
}
