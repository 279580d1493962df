/**
 * The live view of an ubuntu instance: an x11vnc server on the instance's display, started on
 * the first `stream_url` and bridged to WebSocket viewers (noVNC) behind the server's token.
 *
 * x11vnc listens on 127.0.0.1 only, on a port it picks itself (`-autoport`, read from its
 * `PORT=` line), and asks for a random VNC password: other local processes (other instances
 * share the loopback interface) cannot watch or drive the display; the password reaches only
 * the token-protected live-view page. It reads the password from a file it deletes at once
 * (`-passwdfile rm:`), so the password never appears in a command line.
 */
import { randomBytes } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { connect, type Socket } from 'node:net';
import { join } from 'node:path';
import type { Duplex } from 'node:stream';
import { createInterface } from 'node:readline';
import { WebSocketServer, type WebSocket } from 'ws';
import { writeFileAtomic } from '../../internal/fs.js';
import { Supervised } from '../../internal/process.js';
import { refuseUpgrade } from '../chromium/index.js';
import type { Logger } from '../runtime.js';

export interface VncOptions {
  /** Environment naming the display for a client on the host: `DISPLAY`, `XAUTHORITY`. */
  displayEnv: Readonly<Record<string, string>>;
  /** A server-only directory of the instance (not visible inside the sandbox). */
  runDir: string;
  log: Logger;
  /** x11vnc binary. Default env `BURROW_X11VNC`, else `/usr/bin/x11vnc`. */
  x11vnc?: string;
  /** How long x11vnc may take to listen, in ms. Default 15 000. */
  startTimeoutMs?: number;
}

/** Bytes queued towards one viewer before the VNC side is paused. */
const HIGH_WATER = 4 * 1024 * 1024;
const CONNECT_TIMEOUT_MS = 5_000;

interface Running {
  proc: Supervised;
  port: number;
}

export class VncServer {
  /** The VNC password (8 characters: VNC authentication uses no more). */
  readonly password = randomBytes(6).toString('base64url');
  readonly #opts: VncOptions;
  readonly #wss = new WebSocketServer({
    noServer: true,
    perMessageDeflate: false,
    maxPayload: 1024 * 1024,
    handleProtocols: (protocols) => (protocols.has('binary') ? 'binary' : false),
  });
  readonly #bridges = new Set<{ ws?: WebSocket; tcp: Socket }>();
  #running: Promise<Running> | undefined;
  #paused = false;
  #stopped = false;

  constructor(opts: VncOptions) {
    this.#opts = opts;
  }

  /** Start x11vnc unless it runs; resolves with its port. */
  ensure(): Promise<number> {
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
      refuseUpgrade(socket, 502, 'The live view is not available');
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
    const { displayEnv, runDir, log } = this.#opts;
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
    const env = { PATH: '/usr/bin:/bin', HOME: runDir, ...displayEnv };
    const proc = new Supervised(
      this.#opts.x11vnc ?? process.env.BURROW_X11VNC ?? '/usr/bin/x11vnc',
      args,
      {
        env,
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    const tail: string[] = [];
    createInterface({ input: proc.child.stderr! }).on('line', (line) => {
      tail.push(line);
      if (tail.length > 15) tail.shift();
    });
    const port = new Promise<number>((resolve) => {
      createInterface({ input: proc.child.stdout! }).on('line', (line) => {
        const m = /^PORT=(\d+)$/.exec(line.trim());
        if (m) resolve(Number(m[1]));
      });
    });
    const timeoutMs = this.#opts.startTimeoutMs ?? 15_000;
    let timer: NodeJS.Timeout | undefined;
    const outcome = await Promise.race([
      port,
      proc.exited.then((e) => new Error(`x11vnc exited (${e.signal ?? `status ${e.code}`})`)),
      new Promise<Error>((r) => {
        timer = setTimeout(
          () => r(new Error(`x11vnc did not listen within ${timeoutMs} ms`)),
          timeoutMs,
        );
      }),
    ]);
    clearTimeout(timer);
    if (outcome instanceof Error) {
      await proc.kill(500);
      const last = tail
        .filter((l) => l.trim())
        .slice(-5)
        .join(' | ');
      throw new Error(last ? `${outcome.message}: ${last}` : outcome.message);
    }
    if (this.#paused) proc.signalGroup('SIGSTOP');
    const running: Running = { proc, port: outcome };
    void proc.exited.then((e) => {
      if (this.#stopped) return;
      log.warn({ exit: e, stderr: tail.join('\n') }, 'x11vnc exited; the next viewer restarts it');
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
    const tcp = await new Promise<Socket>((resolve, reject) => {
      const s = connect({ host: '127.0.0.1', port });
      const timer = setTimeout(() => {
        s.destroy();
        reject(new Error('connecting to x11vnc timed out'));
      }, CONNECT_TIMEOUT_MS);
      s.once('connect', () => {
        clearTimeout(timer);
        s.removeAllListeners('error');
        resolve(s);
      });
      s.once('error', (err) => {
        clearTimeout(timer);
        reject(err);
      });
    });
    const bridge: { ws?: WebSocket; tcp: Socket } = { tcp };
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
