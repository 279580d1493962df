/**
 * Computer actions on an ubuntu instance's X display (COMPAT.md "computer actions").
 *
 * Input goes through `xdotool` (argument arrays, never a shell; every call has a deadline and is
 * killed past it). Screenshots do not spawn anything: a small X11 client asks the server for the
 * root window's pixels (`GetImage`, ZPixmap) over the display's unix socket and a pure-Node PNG
 * encoder (zlib) turns them into the PNG the API returns. Characters the keymap lacks are bound
 * to spare keycodes over the same connection before xdotool types them.
 *
 * `UbuntuDesktop` (end of file) is what the runtime wires up: these computer actions, the live
 * view (vnc.ts, liveview-page.ts) and the headful desktop browser.
 */
import { execFile, type StdioOptions } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import type { IncomingMessage } from 'node:http';
import { connect, type Socket } from 'node:net';
import { join, posix } from 'node:path';
import type { Duplex } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { crc32, deflate } from 'node:zlib';
import { promisify } from 'node:util';
import type { ParsedComputerAction, ToolResult } from '../../api/index.js';
import type { Supervised } from '../../internal/process.js';
import type { StreamPage } from '../browser/liveview-page.js';
import { BrowserController, refuseUpgrade } from '../chromium/index.js';
import { expandKeys, keyForChar, lookupKey, xKeysym } from '../keys.js';
import type { RuntimeContext } from '../runtime.js';
import { vncLiveViewPage } from './liveview-page.js';
import { VncServer } from './vnc.js';

const deflateAsync = promisify(deflate);

export interface XComputerOptions {
  /** X display name, e.g. `:3`. */
  display: string;
  /** Screen size `[width, height]` in pixels; coordinates are clamped to it. */
  resolution: readonly [number, number];
  /** Xauthority file granting access to the display, if the server requires one. */
  xauthority?: string | undefined;
  /**
   * Directory holding the display's socket as the host sees it, e.g. the sandbox's /tmp on the
   * host plus `/.X11-unix`. Default `/tmp/.X11-unix`.
   */
  socketDir?: string | undefined;
  /** xdotool binary. Default `/usr/bin/xdotool`. */
  xdotool?: string;
  /**
   * Pause after an action that changes the screen, before its screenshot, so that applications
   * have repainted. In ms; default 100.
   */
  settleMs?: number;
}

/** The xdotool button number of each API button. */
const XBUTTON = { left: 1, middle: 2, right: 3, back: 8, forward: 9 } as const;
/** Inter-key delay of `xdotool type`, in ms (0 makes some applications drop keys). */
const TYPE_DELAY_MS = 6;
/** Time applications get to read a changed keymap before keys of it are typed, in ms. */
const KEYMAP_SETTLE_MS = 150;
/** Deadline of one xdotool call that does a bounded amount of work, in ms. */
const XDOTOOL_TIMEOUT_MS = 5_000;

/** A tool failure the action reports in `error` (HTTP 200), as opposed to a server fault. */
export class ActionError extends Error {
  override name = 'ActionError';
}

/** Serialises async work: one computer action at a time per instance. */
class Queue {
  #tail: Promise<unknown> = Promise.resolve();
  run<T>(fn: () => Promise<T>): Promise<T> {
    const result = this.#tail.then(fn, fn);
    this.#tail = result.catch(() => undefined);
    return result;
  }
}

export class XComputer {
  readonly #opts: Required<Omit<XComputerOptions, 'xauthority' | 'socketDir'>> &
    Pick<XComputerOptions, 'xauthority' | 'socketDir'>;
  readonly #x11: X11Screen;
  readonly #queue = new Queue();
  readonly #env: NodeJS.ProcessEnv;

  constructor(opts: XComputerOptions) {
    this.#opts = { xdotool: '/usr/bin/xdotool', settleMs: 100, ...opts };
    this.#x11 = new X11Screen(opts);
    this.#env = {
      PATH: '/usr/bin:/bin',
      LC_ALL: 'C.UTF-8', // xdotool type reads UTF-8 text only under a UTF-8 locale
      DISPLAY: opts.display,
      ...(opts.xauthority !== undefined && { XAUTHORITY: opts.xauthority }),
    };
  }

  /** PNG of the whole root window. */
  screenshot(): Promise<Buffer> {
    return this.#x11.screenshot();
  }

  /** Runs one action; tool failures come back in `error`, with a screenshot when one was asked for. */
  run(action: ParsedComputerAction): Promise<ToolResult> {
    return this.#queue.run(async () => {
      const result: ToolResult = {};
      let settle = false;
      try {
        const out = await this.#act(action);
        if (out !== undefined) result.output = out;
        settle =
          action.action !== 'take_screenshot' &&
          action.action !== 'get_cursor_position' &&
          action.action !== 'wait';
      } catch (err) {
        if (!(err instanceof ActionError)) throw err;
        result.error = err.message;
      }
      if (action.screenshot ?? true) {
        if (settle && this.#opts.settleMs > 0) await sleep(this.#opts.settleMs);
        result.base64_image = (await this.screenshot()).toString('base64');
      }
      return result;
    });
  }

  /** Closes the X connection. The display itself belongs to the runtime. */
  close(): void {
    this.#x11.close();
  }

  async #act(a: ParsedComputerAction): Promise<string | undefined> {
    switch (a.action) {
      case 'move_mouse':
        await this.#withHeld(a.hold_keys, ['mousemove', ...this.#xy(a.coordinates)]);
        return;
      case 'click_mouse': {
        const button = String(XBUTTON[a.button]);
        const args = a.coordinates ? ['mousemove', ...this.#xy(a.coordinates)] : [];
        const type = a.click_type ?? 'click';
        if (type === 'down') args.push('mousedown', button);
        else if (type === 'up') args.push('mouseup', button);
        else {
          const n = a.num_clicks ?? 1;
          // xdotool sleeps `--delay` after every click, the last one included
          args.push('click', '--repeat', String(n), '--delay', n > 1 ? '50' : '0', button);
        }
        await this.#withHeld(a.hold_keys, args);
        return;
      }
      case 'drag_mouse': {
        const [first, ...rest] = a.path;
        const args = ['mousemove', ...this.#xy(first!), 'mousedown', '1', 'sleep', '0.05'];
        for (const p of rest) args.push('mousemove', ...this.#xy(p), 'sleep', '0.01');
        args.push('sleep', '0.05', 'mouseup', '1');
        await this.#withHeld(a.hold_keys, args, XDOTOOL_TIMEOUT_MS + rest.length * 50);
        return;
      }
      case 'scroll': {
        const args = a.coordinates ? ['mousemove', ...this.#xy(a.coordinates)] : [];
        const notches = (delta: number, neg: number, pos: number) => {
          const n = Math.round(Math.abs(delta));
          if (n > 0)
            args.push(
              'click',
              '--repeat',
              String(n),
              '--delay',
              '10',
              String(delta < 0 ? neg : pos),
            );
          return n;
        };
        const total = notches(a.delta_y ?? 0, 4, 5) + notches(a.delta_x ?? 0, 6, 7);
        if (args.length > 0)
          await this.#withHeld(a.hold_keys, args, XDOTOOL_TIMEOUT_MS + total * 30);
        return;
      }
      case 'press_key': {
        const chord = keysyms(a.keys).join('+');
        if (!a.duration) {
          await this.#xdotool(['key', '--delay', '0', chord]);
          return;
        }
        await this.#xdotool(['keydown', '--delay', '0', chord]);
        try {
          await sleep(a.duration * 1000);
        } finally {
          await this.#xdotool(['keyup', '--delay', '0', chord]);
        }
        return;
      }
      case 'type_text': {
        if (a.text === '') return;
        await this.#holding(a.hold_keys, async () => {
          for (const run of typingRuns(a.text)) {
            // bind what the keymap lacks first, and give applications time to see the new
            // keymap: xdotool's own on-the-fly binding races them and loses characters
            if (run.remapped && (await this.#x11.ensureKeysyms([...run.text].map(keysymOf)))) {
              await sleep(KEYMAP_SETTLE_MS);
            }
            const timeout = XDOTOOL_TIMEOUT_MS + [...run.text].length * TYPE_DELAY_MS * 4;
            const type = ['type', '--delay', String(TYPE_DELAY_MS), '--file', '-'];
            await this.#xdotool(type, timeout, run.text);
          }
        });
        return;
      }
      case 'wait':
        await sleep(a.duration * 1000);
        return;
      case 'take_screenshot':
        return;
      case 'get_cursor_position': {
        const out = await this.#xdotool(['getmouselocation', '--shell']);
        const x = /^X=(-?\d+)$/m.exec(out)?.[1];
        const y = /^Y=(-?\d+)$/m.exec(out)?.[1];
        if (x === undefined || y === undefined)
          throw new Error(`unexpected xdotool output: ${out}`);
        return `X=${x},Y=${y}`;
      }
    }
  }

  /** `[x, y]` clamped to the screen, as xdotool arguments. */
  #xy([x, y]: readonly [number, number]): [string, string] {
    const [w, h] = this.#opts.resolution;
    return [String(clamp(x, 0, w - 1)), String(clamp(y, 0, h - 1))];
  }

  /** One xdotool call with `hold_keys` pressed around it, released even if it fails. */
  #withHeld(hold: readonly string[] | undefined, args: string[], timeoutMs = XDOTOOL_TIMEOUT_MS) {
    if (!hold?.length) return this.#xdotool(args, timeoutMs);
    const held = keysyms(hold);
    const down = ['keydown', '--delay', '0', held.join('+')];
    const up = ['keyup', '--delay', '0', held.join('+')];
    return this.#xdotool([...down, ...args, ...up], timeoutMs).catch(async (err: unknown) => {
      await this.#xdotool(up).catch(() => undefined);
      throw err;
    });
  }

  /** `fn` with `hold_keys` pressed (separate xdotool calls), released even if it fails. */
  async #holding<T>(hold: readonly string[] | undefined, fn: () => Promise<T>): Promise<T> {
    if (!hold?.length) return fn();
    const held = keysyms(hold).join('+');
    await this.#xdotool(['keydown', '--delay', '0', held]);
    try {
      return await fn();
    } finally {
      await this.#xdotool(['keyup', '--delay', '0', held]);
    }
  }

  /** Runs xdotool with a deadline; its complaints about key names become an ActionError. */
  #xdotool(args: string[], timeoutMs = XDOTOOL_TIMEOUT_MS, stdin?: string): Promise<string> {
    return new Promise((resolve, reject) => {
      const child = execFile(
        this.#opts.xdotool,
        args,
        { env: this.#env, timeout: timeoutMs, killSignal: 'SIGKILL', maxBuffer: 1024 * 1024 },
        (err, stdout, stderr) => {
          const complaint = /No such key name '([^']*)'|Invalid key sequence '([^']*)'/.exec(
            stderr,
          );
          if (complaint) {
            return reject(new ActionError(`Unknown key name '${complaint[1] ?? complaint[2]}'`));
          }
          if (err) {
            const e = err as NodeJS.ErrnoException & { killed?: boolean };
            if (e.killed)
              return reject(new ActionError(`xdotool did not finish within ${timeoutMs} ms`));
            if (e.code === 'ENOENT')
              return reject(new Error(`${this.#opts.xdotool} is not installed`));
            return reject(new ActionError(`xdotool failed: ${stderr.trim() || e.message}`));
          }
          resolve(stdout);
        },
      );
      child.stdin?.on('error', () => undefined);
      child.stdin?.end(stdin ?? '');
    });
  }
}

/** The X keysym of a character: Latin-1 keysyms equal the code point, others are 0x1000000 + it. */
function keysymOf(ch: string): number {
  const cp = ch.codePointAt(0)!;
  return (cp >= 0x20 && cp <= 0x7e) || (cp >= 0xa0 && cp <= 0xff) ? cp : 0x01000000 + cp;
}

/** `text` cut into runs the US keymap can type and runs xdotool must remap keys for. */
function typingRuns(text: string): { text: string; remapped: boolean }[] {
  const runs: { text: string; remapped: boolean }[] = [];
  for (const ch of text) {
    const remapped = keyForChar(ch) === undefined;
    const last = runs.at(-1);
    if (last && last.remapped === remapped) last.text += ch;
    else runs.push({ text: ch, remapped });
  }
  return runs;
}

const clamp = (v: number, lo: number, hi: number) => Math.min(Math.max(Math.round(v), lo), hi);

/** X keysyms of key entries (chords like `ctrl+c` expanded). */
function keysyms(entries: readonly string[]): string[] {
  return expandKeys(entries).map((k) => {
    if (lookupKey(k) === undefined && !/^[A-Za-z0-9_]+$/.test(k)) {
      throw new ActionError(`Unknown key name '${k}'`);
    }
    return xKeysym(k);
  });
}

// ---------------------------------------------------------------------------------------------
// A minimal X11 client: connection setup (optionally with MIT-MAGIC-COOKIE-1) and GetImage.

/** Deadline of one X request, in ms; past it the connection is dropped and reopened next time. */
const X_REQUEST_TIMEOUT_MS = 5_000;
/** Bytes of pixels asked for per GetImage request (the screen is fetched in strips). */
const STRIP_BYTES = 4 * 1024 * 1024;

interface PixelFormat {
  depth: number;
  bitsPerPixel: number;
  scanlinePad: number;
}

interface ScreenInfo {
  root: number;
  width: number;
  height: number;
  depth: number;
  format: PixelFormat;
  masks: { red: number; green: number; blue: number };
  minKeycode: number;
  maxKeycode: number;
}

interface PendingReply {
  resolve: (reply: Buffer) => void;
  reject: (err: Error) => void;
}

class X11Connection {
  readonly #socket: Socket;
  readonly #pending = new Map<number, PendingReply>();
  #chunks: Buffer[] = [];
  #buffered = 0;
  #seq = 0;
  #error: Error | undefined;
  /** An X error of a request that has no reply (see `sendAndSync`). */
  #voidError: Error | undefined;
  screen!: ScreenInfo;
  #setup: PendingReply | undefined;

  private constructor(socket: Socket) {
    this.#socket = socket;
    socket.on('data', (chunk) => this.#onData(chunk));
    socket.on('error', (err) => this.#fail(err));
    socket.on('close', () => this.#fail(new Error('X connection closed')));
  }

  static async open({ display, xauthority, socketDir }: X11Target): Promise<X11Connection> {
    const m = /^:(\d+)(?:\.\d+)?$/.exec(display);
    if (!m) throw new Error(`Unsupported X display name ${JSON.stringify(display)}`);
    const number = m[1]!;
    const cookie = xauthority ? await readCookie(xauthority, number) : undefined;
    const socket = await openSocket(number, socketDir);
    const conn = new X11Connection(socket);
    const setup = new Promise<Buffer>((resolve, reject) => (conn.#setup = { resolve, reject }));
    const name = cookie ? Buffer.from('MIT-MAGIC-COOKIE-1') : Buffer.alloc(0);
    const data = cookie ?? Buffer.alloc(0);
    const head = Buffer.alloc(12);
    head.write('l', 0, 'latin1'); // little-endian
    head.writeUInt16LE(11, 2);
    head.writeUInt16LE(0, 4);
    head.writeUInt16LE(name.length, 6);
    head.writeUInt16LE(data.length, 8);
    socket.write(Buffer.concat([head, pad4(name), pad4(data)]));
    const reply = await withTimeout(setup, X_REQUEST_TIMEOUT_MS, 'X connection setup').catch(
      (err: unknown) => {
        socket.destroy();
        throw err;
      },
    );
    conn.screen = parseSetup(reply);
    return conn;
  }

  get broken(): boolean {
    return this.#error !== undefined;
  }

  /** Sends one request (already padded to 4 bytes) and resolves with its reply. */
  request(body: Buffer): Promise<Buffer> {
    if (this.#error) return Promise.reject(this.#error);
    const seq = (this.#seq = (this.#seq + 1) & 0xffff);
    return new Promise((resolve, reject) => {
      this.#pending.set(seq, { resolve, reject });
      this.#socket.write(body);
    });
  }

  /**
   * Sends requests that have no reply, then one round trip (GetInputFocus) so that they have
   * been processed when it resolves; rejects with the first X error any of them caused.
   */
  async sendAndSync(bodies: Buffer[]): Promise<void> {
    if (this.#error) throw this.#error;
    this.#voidError = undefined;
    for (const body of bodies) {
      this.#seq = (this.#seq + 1) & 0xffff;
      this.#socket.write(body);
    }
    const sync = Buffer.alloc(4);
    sync[0] = 43; // GetInputFocus
    sync.writeUInt16LE(1, 2);
    await this.request(sync);
    if (this.#voidError) throw this.#voidError;
  }

  close(): void {
    this.#socket.destroy();
    this.#fail(new Error('X connection closed'));
  }

  #fail(err: Error): void {
    this.#error ??= err;
    this.#setup?.reject(err);
    this.#setup = undefined;
    for (const p of this.#pending.values()) p.reject(this.#error);
    this.#pending.clear();
  }

  #take(n: number): Buffer {
    const all =
      this.#chunks.length === 1 ? this.#chunks[0]! : Buffer.concat(this.#chunks, this.#buffered);
    const out = all.subarray(0, n);
    const restBuf = all.subarray(n);
    this.#chunks = restBuf.length > 0 ? [restBuf] : [];
    this.#buffered = restBuf.length;
    return out;
  }

  #peek(n: number): Buffer {
    if (this.#chunks.length > 1 && this.#chunks[0]!.length < n) {
      this.#chunks = [Buffer.concat(this.#chunks, this.#buffered)];
    }
    return this.#chunks[0]!;
  }

  #onData(chunk: Buffer): void {
    this.#chunks.push(chunk);
    this.#buffered += chunk.length;
    for (;;) {
      if (this.#setup) {
        if (this.#buffered < 8) return;
        const h = this.#peek(8);
        const total = 8 + h.readUInt16LE(6) * 4;
        if (this.#buffered < total) return;
        const msg = this.#take(total);
        const setup = this.#setup;
        this.#setup = undefined;
        if (msg[0] === 1) setup.resolve(msg);
        else {
          const reason = msg
            .subarray(8, 8 + (msg[0] === 0 ? msg[1]! : msg.length - 8))
            .toString('latin1');
          setup.reject(
            new Error(`X server refused the connection: ${reason.replace(/\0+$/, '').trim()}`),
          );
        }
        continue;
      }
      if (this.#buffered < 32) return;
      const h = this.#peek(32);
      const kind = h[0]!;
      const total = kind === 1 ? 32 + h.readUInt32LE(4) * 4 : 32;
      if (this.#buffered < total) return;
      const msg = this.#take(total);
      if (kind !== 0 && kind !== 1) continue; // an event: none selected, ignore
      const seq = msg.readUInt16LE(2);
      const p = this.#pending.get(seq);
      const err =
        kind === 0 ? new Error(`X error ${msg[1]} (request opcode ${msg[10]})`) : undefined;
      if (!p) {
        if (err) this.#voidError ??= err;
        continue;
      }
      this.#pending.delete(seq);
      if (err) p.reject(err);
      else p.resolve(msg);
    }
  }
}

/** Where an X server is, for the X11 client. */
export type X11Target = Pick<XComputerOptions, 'display' | 'xauthority' | 'socketDir'>;

/** The root window's pixels as PNG, over one lazily (re)opened X connection. */
export class X11Screen {
  readonly #target: X11Target;
  /** Keysyms this client bound to spare keycodes, oldest first. */
  readonly #bound = new Map<number, number>();
  #conn: Promise<X11Connection> | undefined;
  #closed = false;

  constructor(target: X11Target) {
    this.#target = target;
  }

  async screenshot(): Promise<Buffer> {
    const conn = await this.#connection();
    const { width, height } = conn.screen;
    try {
      const raw = await withTimeout(
        getImage(conn, 0, 0, width, height),
        X_REQUEST_TIMEOUT_MS,
        'X GetImage',
      );
      return await encodePng(width, height, toRgbRows(conn.screen, raw, width, height));
    } catch (err) {
      conn.close(); // unknown state: reconnect next time
      this.#conn = undefined;
      throw err;
    }
  }

  /**
   * Gives every keysym in `keysyms` a keycode, binding the missing ones to spare keycodes
   * (reusing the least recently bound when none are left). Resolves true when the keymap
   * changed: applications learn of it asynchronously.
   */
  async ensureKeysyms(keysyms: readonly number[]): Promise<boolean> {
    const conn = await this.#connection();
    const { minKeycode, maxKeycode } = conn.screen;
    const count = maxKeycode - minKeycode + 1;
    const req = Buffer.alloc(8);
    req[0] = 101; // GetKeyboardMapping
    req.writeUInt16LE(2, 2);
    req[4] = minKeycode;
    req[5] = count;
    const reply = await withTimeout(
      conn.request(req),
      X_REQUEST_TIMEOUT_MS,
      'X GetKeyboardMapping',
    );
    const per = reply[1]!;
    const bound = new Map<number, number>(); // keysym → keycode
    const spare: number[] = [];
    for (let k = 0; k < count; k++) {
      let empty = true;
      for (let i = 0; i < per; i++) {
        const sym = reply.readUInt32LE(32 + (k * per + i) * 4);
        if (sym === 0) continue;
        empty = false;
        if (!bound.has(sym)) bound.set(sym, minKeycode + k);
      }
      if (empty) spare.push(minKeycode + k);
    }
    const missing = [...new Set(keysyms)].filter((sym) => !bound.has(sym));
    if (missing.length === 0) return false;
    // ours from earlier calls, oldest first, unless needed now
    const needed = new Set(keysyms);
    const recyclable = [...this.#bound.entries()]
      .filter(([sym, code]) => !needed.has(sym) && bound.get(sym) === code)
      .map(([, code]) => code);
    const changes: Buffer[] = [];
    for (const sym of missing) {
      const code = spare.pop() ?? recyclable.shift();
      if (code === undefined) throw new ActionError('No spare keycode left to type this text');
      const change = Buffer.alloc(8 + per * 4);
      change[0] = 100; // ChangeKeyboardMapping
      change[1] = 1; // one keycode
      change.writeUInt16LE(2 + per, 2);
      change[4] = code;
      change[5] = per;
      change.writeUInt32LE(sym, 8); // level 1
      if (per > 1) change.writeUInt32LE(sym, 12); // level 2 (with Shift)
      changes.push(change);
      for (const [s, c] of this.#bound) if (c === code) this.#bound.delete(s);
      this.#bound.set(sym, code);
    }
    await withTimeout(conn.sendAndSync(changes), X_REQUEST_TIMEOUT_MS, 'X ChangeKeyboardMapping');
    return true;
  }

  close(): void {
    this.#closed = true;
    void this.#conn?.then((c) => c.close()).catch(() => undefined);
    this.#conn = undefined;
  }

  #connection(): Promise<X11Connection> {
    if (this.#closed) return Promise.reject(new Error('The display is closed'));
    const existing = this.#conn;
    if (existing) {
      return existing.then((c) => {
        if (!c.broken) return c;
        if (this.#conn === existing) this.#conn = undefined;
        return this.#connection();
      });
    }
    const conn = X11Connection.open(this.#target);
    this.#conn = conn;
    conn.catch(() => {
      if (this.#conn === conn) this.#conn = undefined;
    });
    return conn;
  }
}

/** ZPixmap data of a rectangle, fetched in strips pipelined on the connection. */
async function getImage(
  conn: X11Connection,
  x: number,
  y: number,
  w: number,
  h: number,
): Promise<Buffer[]> {
  const rowBytes = stride(conn.screen.format, w);
  const rows = Math.max(1, Math.floor(STRIP_BYTES / rowBytes));
  const strips: Promise<Buffer>[] = [];
  for (let top = 0; top < h; top += rows) {
    const req = Buffer.alloc(20);
    req[0] = 73; // GetImage
    req[1] = 2; // ZPixmap
    req.writeUInt16LE(5, 2);
    req.writeUInt32LE(conn.screen.root, 4);
    req.writeInt16LE(x, 8);
    req.writeInt16LE(y + top, 10);
    req.writeUInt16LE(w, 12);
    req.writeUInt16LE(Math.min(rows, h - top), 14);
    req.writeUInt32LE(0xffffffff, 16);
    strips.push(conn.request(req).then((reply) => reply.subarray(32)));
  }
  return Promise.all(strips);
}

const stride = (f: PixelFormat, w: number) =>
  Math.ceil((w * f.bitsPerPixel) / f.scanlinePad) * (f.scanlinePad / 8);

/** ZPixmap strips → PNG scanlines (filter byte 0 + RGB). */
function toRgbRows(screen: ScreenInfo, strips: Buffer[], w: number, h: number): Buffer {
  const { format, masks } = screen;
  const out = Buffer.alloc(h * (1 + w * 3));
  const src = strips.length === 1 ? strips[0]! : Buffer.concat(strips);
  const rowBytes = stride(format, w);
  const bpp = format.bitsPerPixel;
  const standard =
    bpp === 32 && masks.red === 0xff0000 && masks.green === 0xff00 && masks.blue === 0xff;
  const channel = (mask: number) => {
    const shift = mask === 0 ? 0 : 31 - Math.clz32(mask & -mask);
    const max = mask >>> shift;
    return (v: number) => (max === 0 ? 0 : Math.round((((v & mask) >>> shift) * 255) / max));
  };
  const [r, g, b] = [channel(masks.red), channel(masks.green), channel(masks.blue)];
  let o = 0;
  for (let row = 0; row < h; row++) {
    out[o++] = 0;
    let s = row * rowBytes;
    if (standard) {
      for (let col = 0; col < w; col++, s += 4) {
        out[o++] = src[s + 2]!;
        out[o++] = src[s + 1]!;
        out[o++] = src[s]!;
      }
    } else {
      for (let col = 0; col < w; col++) {
        const v =
          bpp === 32
            ? src.readUInt32LE(s)
            : bpp === 24
              ? src.readUIntLE(s, 3)
              : src.readUInt16LE(s);
        s += bpp / 8;
        out[o++] = r(v);
        out[o++] = g(v);
        out[o++] = b(v);
      }
    }
  }
  return out;
}

function parseSetup(buf: Buffer): ScreenInfo {
  const vendorLen = buf.readUInt16LE(24);
  const screens = buf[28]!;
  const nFormats = buf[29]!;
  if (screens < 1) throw new Error('X server has no screens');
  let o = 40 + Math.ceil(vendorLen / 4) * 4;
  const formats: PixelFormat[] = [];
  for (let i = 0; i < nFormats; i++, o += 8) {
    formats.push({ depth: buf[o]!, bitsPerPixel: buf[o + 1]!, scanlinePad: buf[o + 2]! });
  }
  const root = buf.readUInt32LE(o);
  const width = buf.readUInt16LE(o + 20);
  const height = buf.readUInt16LE(o + 22);
  const rootVisual = buf.readUInt32LE(o + 32);
  const depth = buf[o + 38]!;
  const nDepths = buf[o + 39]!;
  o += 40;
  let masks: ScreenInfo['masks'] | undefined;
  for (let d = 0; d < nDepths; d++) {
    const nVisuals = buf.readUInt16LE(o + 2);
    o += 8;
    for (let v = 0; v < nVisuals; v++, o += 24) {
      if (buf.readUInt32LE(o) === rootVisual) {
        masks = {
          red: buf.readUInt32LE(o + 8),
          green: buf.readUInt32LE(o + 12),
          blue: buf.readUInt32LE(o + 16),
        };
      }
    }
  }
  const format = formats.find((f) => f.depth === depth);
  if (!format || !masks || ![16, 24, 32].includes(format.bitsPerPixel)) {
    throw new Error(`Unsupported X screen format (depth ${depth})`);
  }
  return { root, width, height, depth, format, masks, minKeycode: buf[34]!, maxKeycode: buf[35]! };
}

/** The MIT-MAGIC-COOKIE-1 for display `number` from an Xauthority file. */
async function readCookie(file: string, number: string): Promise<Buffer | undefined> {
  const buf = await readFile(file);
  let o = 0;
  const field = () => {
    const len = buf.readUInt16BE(o);
    const v = buf.subarray(o + 2, o + 2 + len);
    o += 2 + len;
    return v;
  };
  let fallback: Buffer | undefined;
  while (o + 2 <= buf.length) {
    o += 2; // family
    field(); // address
    const num = field().toString('latin1');
    const name = field().toString('latin1');
    const data = field();
    if (name !== 'MIT-MAGIC-COOKIE-1') continue;
    if (num === number) return data;
    if (num === '') fallback ??= data;
  }
  return fallback;
}

/**
 * The display's socket file: in `socketDir` (where a sandboxed X server's /tmp is on the host),
 * then in the host's /tmp. (Node 20 cannot reach Linux abstract sockets the way X clients name
 * them, so the file is the way in.)
 */
async function openSocket(number: string, socketDir = '/tmp/.X11-unix'): Promise<Socket> {
  const paths = [...new Set([`${socketDir}/X${number}`, `/tmp/.X11-unix/X${number}`])];
  let last: unknown;
  for (const path of paths) {
    try {
      return await new Promise<Socket>((resolve, reject) => {
        const socket = connect({ path });
        const timer = setTimeout(() => {
          socket.destroy();
          reject(new Error(`connecting to X display :${number} timed out`));
        }, X_REQUEST_TIMEOUT_MS);
        socket.once('connect', () => {
          clearTimeout(timer);
          socket.removeAllListeners('error');
          resolve(socket);
        });
        socket.once('error', (err) => {
          clearTimeout(timer);
          reject(err);
        });
      });
    } catch (err) {
      last = err;
    }
  }
  throw new Error(`Cannot connect to X display :${number}: ${(last as Error).message}`);
}

const pad4 = (b: Buffer) =>
  b.length % 4 === 0 ? b : Buffer.concat([b, Buffer.alloc(4 - (b.length % 4))]);

function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not answer within ${ms} ms`)), ms);
  });
  return Promise.race([p, deadline]).finally(() => clearTimeout(timer));
}

// ---------------------------------------------------------------------------------------------
// PNG encoding

function chunk(type: string, data: Buffer): Buffer {
  const out = Buffer.alloc(12 + data.length);
  out.writeUInt32BE(data.length, 0);
  out.write(type, 4, 'latin1');
  data.copy(out, 8);
  out.writeUInt32BE(crc32(out.subarray(4, 8 + data.length)), 8 + data.length);
  return out;
}

/** An 8-bit RGB PNG from scanlines that already carry their filter byte. */
export async function encodePng(width: number, height: number, scanlines: Buffer): Promise<Buffer> {
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(width, 0);
  ihdr.writeUInt32BE(height, 4);
  ihdr[8] = 8; // bit depth
  ihdr[9] = 2; // colour type RGB
  const idat = await deflateAsync(scanlines, { level: 3 });
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', ihdr),
    chunk('IDAT', idat),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}

// ---------------------------------------------------------------------------------------------
// The desktop of an ubuntu instance: what the runtime wires to the API.

export interface DesktopOptions {
  ctx: RuntimeContext;
  /** Environment naming the instance's display for X clients on the host (`DISPLAY`, `XAUTHORITY`). */
  displayEnv: Readonly<Record<string, string>>;
  /** A server-only directory of the instance (x11vnc's password file). */
  runDir: string;
  /** Host directory of the display's socket (the sandbox's `/tmp/.X11-unix` on the host). */
  x11SocketDir?: string | undefined;
  /** Where the desktop browser runs: inside the instance's sandbox (ISOLATION.md). */
  browserSandbox: BrowserSandbox;
}

/** What the desktop browser needs of the instance's sandbox. */
export interface BrowserSandbox {
  /** Start a process in the sandbox (`Sandbox.spawn`): tracked, paused and killed with it. */
  spawn(argv: string[], opts: { env: Record<string, string>; stdio: StdioOptions }): Supervised;
  /** Run a command in the sandbox to completion (`Sandbox.exec`). */
  exec(
    argv: string[],
    opts: { env: Record<string, string>; timeoutMs: number },
  ): Promise<{ code: number | null; stderr: Buffer }>;
  /** The instance's environment as processes in the sandbox get it (HOME, DISPLAY, XAUTHORITY …). */
  env(): Record<string, string>;
  /** HOME inside the sandbox (`/home/user`) and on the host. */
  home: string;
  hostHome: string;
}

/** The desktop browser's files, under HOME in the sandbox: its profile and temp files. */
const BROWSER_DIR = '.config/burrow-chromium';

/**
 * Computer actions and screenshots (xdotool + X11), the live view (x11vnc + noVNC) and the
 * headful browser of one ubuntu instance's display. xdotool and x11vnc run on the host next to
 * the sandbox, the browser inside it; all are paused, resumed and stopped with the instance.
 */
export class UbuntuDesktop {
  readonly computer: XComputer;
  readonly vnc: VncServer;
  /** `browser/*` on the desktop: a headful Chromium on the display with the same CDP relay. */
  readonly browser: BrowserController;
  readonly #ctx: RuntimeContext;
  #stopping: Promise<void> | undefined;

  constructor(opts: DesktopOptions) {
    const { ctx, displayEnv, runDir, x11SocketDir, browserSandbox: box } = opts;
    this.#ctx = ctx;
    const display = displayEnv.DISPLAY;
    if (!display) throw new Error('the display environment has no DISPLAY');
    this.computer = new XComputer({
      display,
      xauthority: displayEnv.XAUTHORITY,
      socketDir: x11SocketDir,
      resolution: ctx.resolution,
    });
    this.vnc = new VncServer({ displayEnv, runDir, log: ctx.log });
    // Chromium runs inside the sandbox, so a page sees only what the instance's processes see
    // (file:// included); its profile and downloads are in the instance's home.
    const env = () => {
      // TMPDIR: the launcher's own (short) directory for Chromium's sockets
      const { TMPDIR: _tmpdir, ...rest } = box.env();
      return rest;
    };
    this.browser = new BrowserController({
      ctx: { ...ctx, dir: join(box.hostHome, BROWSER_DIR), failed: (reason) => ctx.failed(reason) },
      processDir: posix.join(box.home, BROWSER_DIR),
      spawn: (argv, o) => box.spawn(argv, o),
      mkdir: async (paths) => {
        const r = await box.exec(['mkdir', '-p', '--', ...paths], {
          env: env(),
          timeoutMs: 10_000,
        });
        if (r.code !== 0) throw new Error(`mkdir failed: ${r.stderr.toString().trim()}`);
      },
      headless: false,
      env,
      args: [
        '--window-position=0,0',
        '--disable-infobars',
        '--no-default-browser-check',
        // bubblewrap's minimal /dev/shm need not be writable for an unprivileged server: use /tmp
        '--disable-dev-shm-usage',
      ],
      // a user closing the desktop browser is not an instance failure: browser/start opens it again
      onCrash: (reason) => ctx.log.info({ instance: ctx.id, reason }, 'desktop browser exited'),
    });
  }

  screenshot(): Promise<Buffer> {
    return this.computer.screenshot();
  }

  run(action: ParsedComputerAction): Promise<ToolResult> {
    return this.computer.run(action);
  }

  /** Starts x11vnc if need be; the URL of the live-view page, carrying the instance token. */
  async streamUrl(): Promise<string> {
    await this.vnc.ensure();
    const { publicUrl, id, token } = this.#ctx;
    return `${publicUrl.replace(/\/+$/, '')}/stream/${encodeURIComponent(id)}/?token=${encodeURIComponent(token)}`;
  }

  streamPage(rest: string, query: URLSearchParams): Promise<StreamPage> {
    return vncLiveViewPage(rest, query, { password: this.vnc.password });
  }

  /** `/stream/<id>/websockify` → x11vnc; `/cdp/<id>/…` → the desktop browser's relay. */
  upgrade(
    kind: 'cdp' | 'stream',
    rest: string,
    req: IncomingMessage,
    socket: Duplex,
    head: Buffer,
  ): void {
    if (kind === 'cdp') this.browser.upgrade(rest, req, socket, head);
    else if (rest === 'websockify') this.vnc.upgrade(req, socket, head);
    else refuseUpgrade(socket, 404, 'Unknown live view path');
  }

  async pause(): Promise<void> {
    await this.browser.pause();
    await this.vnc.pause();
  }

  async resume(): Promise<void> {
    await this.vnc.resume();
    this.browser.resume();
  }

  /** Stops x11vnc and the browser, closes the X connection. Idempotent. */
  stop(): Promise<void> {
    this.#stopping ??= (async () => {
      await Promise.all([this.vnc.stop(), this.browser.dispose()]);
      this.computer.close();
    })();
    return this.#stopping;
  }
}
