/**
 * A minimal X11 client over the display's unix socket: screenshots of the root window
 * (GetImage in ZPixmap, fetched in pipelined strips, encoded to PNG in process) and binding
 * keysyms the keymap lacks to spare keycodes (so that xdotool can type any character). The bytes
 * on the wire are in x11-wire.ts. The stream comes from `X11Target.connect`: an instance's
 * display socket is on its disk, so the server never connects to it by a host path.
 */
import { readFile } from 'node:fs/promises';
import type { Duplex } from 'node:stream';
import { MAX_RESOLUTION } from '../../../api/schemas.js';
import { connectWithDeadline } from '../../../internal/connect.js';
import { withDeadline } from '../../../internal/deadline.js';
import { inSlices } from '../../../internal/cpu-share.js';
import { encodePng } from '../../../internal/png.js';
import { ToolFailure } from '../../computer/failure.js';
import { rgbRows } from './pixels.js';
import {
  assignKeycodes,
  changeKeyboardMappingRequest,
  decodeMessage,
  getImageRequest,
  getInputFocusRequest,
  getKeyboardMappingRequest,
  imageData,
  messageLength,
  parseKeyboardMapping,
  parseSetup,
  parseXauthority,
  setupRefusal,
  setupReplyLength,
  setupRequest,
  stride,
  type ScreenInfo,
} from './x11-wire.js';

/** Deadline of one X request, in ms; past it the connection is dropped and reopened next time. */
const X_REQUEST_TIMEOUT_MS = 5_000;
/** Bytes of pixels asked for per GetImage request (the screen is fetched in strips). */
const STRIP_BYTES = 4 * 1024 * 1024;
/**
 * Largest message accepted from the server: a GetImage strip (STRIP_BYTES of pixels, or one
 * row) or a keyboard mapping is far smaller. The X server runs inside the instance, so its
 * replies are untrusted; a larger length ends the connection instead of buffering it.
 */
const MAX_MESSAGE_BYTES = 2 * STRIP_BYTES;
/** Largest screen side accepted, as for an instance's `resolution`. */
const MAX_SCREEN_SIDE = MAX_RESOLUTION;
/** Where X servers put their sockets, in the view of the X server's own processes. */
const SOCKET_DIR = '/tmp/.X11-unix';

/** Where an X server is, for the X11 client. */
export interface X11Target {
  /** X display name, e.g. `:3`. */
  display: string;
  /**
   * Xauthority file granting access to the display, if the server requires one. Read by the
   * server: never a file on an instance's disk.
   */
  xauthority?: string | undefined;
  /**
   * Opens a stream to the X server, given its socket's path as the X server's processes see it
   * (`/tmp/.X11-unix/X<n>`). An instance's display: connected from inside it (`connectInside`).
   * Default: that path on the host (an X server of the host's, no-isolation mode).
   */
  connect?: ((socketPath: string) => Promise<Duplex>) | undefined;
  /**
   * The instance's `resolution`, `[width, height]`: the size its X screen was started at, and
   * the only size a screenshot is taken at (a screen of another size is refused).
   */
  resolution: readonly [number, number];
}

const timedOut = (what: string, ms: number) => () =>
  new Error(`${what} did not answer within ${ms} ms`);

interface PendingReply {
  resolve: (reply: Buffer) => void;
  reject: (err: Error) => void;
}

/** One connection: setup, sequence numbers, replies matched to their requests. */
class X11Connection {
  readonly #socket: Duplex;
  readonly #pending = new Map<number, PendingReply>();
  #chunks: Buffer[] = [];
  #buffered = 0;
  #seq = 0;
  #error: Error | undefined;
  /** An X error of a request that has no reply (see `sendAndSync`). */
  #voidError: Error | undefined;
  screen!: ScreenInfo;
  #setup: PendingReply | undefined;

  private constructor(socket: Duplex) {
    this.#socket = socket;
    socket.on('data', (chunk) => this.#onData(chunk));
    socket.on('error', (err) => this.#fail(err));
    socket.on('close', () => this.#fail(new Error('X connection closed')));
  }

  static async open({ display, xauthority, connect }: X11Target): Promise<X11Connection> {
    const m = /^:(\d+)(?:\.\d+)?$/.exec(display);
    if (!m) throw new Error(`Unsupported X display name ${JSON.stringify(display)}`);
    const number = m[1]!;
    const cookie = xauthority ? parseXauthority(await readFile(xauthority), number) : undefined;
    const path = `${SOCKET_DIR}/X${number}`;
    const socket = await (connect ?? connectOnHost)(path).catch((err: unknown) => {
      // the socket is the instance's own: it may have moved it, and that is its failure
      throw new ToolFailure(
        `The X display :${number} cannot be reached: its socket ${path} was moved or removed, or refuses connections (${(err as Error).message})`,
      );
    });
    const conn = new X11Connection(socket);
    const setup = new Promise<Buffer>((resolve, reject) => (conn.#setup = { resolve, reject }));
    socket.write(setupRequest(cookie));
    const reply = await withDeadline(
      setup,
      X_REQUEST_TIMEOUT_MS,
      timedOut('X connection setup', X_REQUEST_TIMEOUT_MS),
    ).catch((err: unknown) => {
      socket.destroy();
      throw err;
    });
    try {
      conn.screen = parseSetup(reply);
      const { width, height } = conn.screen;
      if (width > MAX_SCREEN_SIDE || height > MAX_SCREEN_SIDE) {
        throw new Error(`X screen of ${width}×${height} is larger than any instance's`);
      }
    } catch (err) {
      socket.destroy();
      throw err;
    }
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
    await this.request(getInputFocusRequest());
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
        const total = setupReplyLength(this.#peek(8));
        if (this.#buffered < total) return;
        const msg = this.#take(total);
        const setup = this.#setup;
        this.#setup = undefined;
        const refusal = setupRefusal(msg);
        if (refusal === undefined) setup.resolve(msg);
        else setup.reject(new Error(`X server refused the connection: ${refusal}`));
        continue;
      }
      if (this.#buffered < 32) return;
      const total = messageLength(this.#peek(32));
      if (total > MAX_MESSAGE_BYTES) {
        this.#socket.destroy();
        this.#fail(new Error(`X server announced a reply of ${total} bytes`));
        return;
      }
      if (this.#buffered < total) return;
      const msg = decodeMessage(this.#take(total));
      if (msg.kind === 'event') continue; // none selected, ignore
      const p = this.#pending.get(msg.seq);
      const err = msg.kind === 'error' ? new Error(msg.message) : undefined;
      if (!p) {
        if (err) this.#voidError ??= err;
        continue;
      }
      this.#pending.delete(msg.seq);
      if (msg.kind === 'error') p.reject(err!);
      else p.resolve(msg.body);
    }
  }
}

/**
 * The root window's pixels as PNG, and keysyms bound on demand, over one lazily (re)opened X
 * connection.
 */
export class X11Screen {
  readonly #target: X11Target;
  /** Keysyms this client bound to spare keycodes (keysym → keycode), oldest first. */
  readonly #bound = new Map<number, number>();
  #conn: Promise<X11Connection> | undefined;
  #closed = false;

  constructor(target: X11Target) {
    this.#target = target;
  }

  /**
   * The screen as PNG. The X server is the instance's: whatever it does wrong (its socket moved,
   * the connection ended, no answer) is a tool failure naming the cause, not a fault of the
   * server. A connection that was already open is retried once on a fresh one first, since the
   * instance may have ended it long before.
   */
  async screenshot(): Promise<Buffer> {
    const reused = this.#conn !== undefined;
    try {
      return await this.#screenshot();
    } catch (err) {
      if (reused && !(err instanceof ToolFailure)) {
        return this.#screenshot().catch((again: unknown) => {
          throw displayFailure(this.#target.display, again);
        });
      }
      throw displayFailure(this.#target.display, err);
    }
  }

  async #screenshot(): Promise<Buffer> {
    const conn = await this.#connection();
    const [width, height] = this.#target.resolution;
    try {
      // the X server is the instance's: a screen of another size than the one the server
      // started (a fake X server on the display's socket, 7680×7680 announced) would make the
      // server fetch and convert up to 59 M pixels; it is refused before anything is fetched
      // (and the connection closed below: the instance may end that server at any time)
      if (conn.screen.width !== width || conn.screen.height !== height) {
        throw new ToolFailure(
          `The X display ${this.#target.display} has a screen of ${conn.screen.width}×${conn.screen.height}, not the instance's ${width}×${height}: its X server was replaced`,
        );
      }
      const raw = await withDeadline(
        getImage(conn, width, height),
        X_REQUEST_TIMEOUT_MS,
        timedOut('X GetImage', X_REQUEST_TIMEOUT_MS),
      );
      // converted in the main thread's shared slices: the pixel format is the instance's too
      const rows = await inSlices(rgbRows(conn.screen, raw, width, height));
      return await encodePng(width, height, rows);
    } catch (err) {
      conn.close(); // unknown state: reconnect next time
      this.#conn = undefined;
      throw err;
    }
  }

  /**
   * Gives every keysym in `keysyms` a keycode, binding the missing ones to spare keycodes
   * (reusing the least recently bound when none are left). Resolves true when the keymap
   * changed: applications learn of it asynchronously. A failure of the display is a tool
   * failure, as for `screenshot`.
   */
  ensureKeysyms(keysyms: readonly number[]): Promise<boolean> {
    return this.#ensureKeysyms(keysyms).catch((err: unknown) => {
      throw displayFailure(this.#target.display, err);
    });
  }

  async #ensureKeysyms(keysyms: readonly number[]): Promise<boolean> {
    const conn = await this.#connection();
    const { minKeycode, maxKeycode } = conn.screen;
    const count = maxKeycode - minKeycode + 1;
    const reply = await withDeadline(
      conn.request(getKeyboardMappingRequest(minKeycode, count)),
      X_REQUEST_TIMEOUT_MS,
      timedOut('X GetKeyboardMapping', X_REQUEST_TIMEOUT_MS),
    );
    const mapping = parseKeyboardMapping(reply, minKeycode, count);
    const assigned = assignKeycodes(mapping, keysyms, this.#bound);
    if (!assigned) throw new ToolFailure('No spare keycode left to type this text');
    if (assigned.length === 0) return false;
    const changes: Buffer[] = [];
    for (const { keysym, keycode } of assigned) {
      changes.push(changeKeyboardMappingRequest(keycode, mapping.perKeycode, keysym));
      for (const [s, c] of this.#bound) if (c === keycode) this.#bound.delete(s);
      this.#bound.set(keysym, keycode);
    }
    await withDeadline(
      conn.sendAndSync(changes),
      X_REQUEST_TIMEOUT_MS,
      timedOut('X ChangeKeyboardMapping', X_REQUEST_TIMEOUT_MS),
    );
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

/** `err` of the instance's X display `display` as the tool failure it is. */
function displayFailure(display: string, err: unknown): ToolFailure {
  if (err instanceof ToolFailure) return err;
  return new ToolFailure(`The X display ${display} failed the request: ${(err as Error).message}`);
}

/** ZPixmap data of the root window's top-left `w` × `h`, fetched in strips pipelined on `conn`. */
function getImage(conn: X11Connection, w: number, h: number): Promise<Buffer[]> {
  const rows = Math.max(1, Math.floor(STRIP_BYTES / stride(conn.screen.format, w)));
  const strips: Promise<Buffer>[] = [];
  for (let top = 0; top < h; top += rows) {
    const req = getImageRequest(conn.screen.root, 0, top, w, Math.min(rows, h - top));
    strips.push(conn.request(req).then(imageData));
  }
  return Promise.all(strips);
}

/**
 * An X server's socket file on the host. (Node 20 cannot reach Linux abstract sockets the way X
 * clients name them, so the file is the way in.)
 */
function connectOnHost(path: string): Promise<Duplex> {
  return connectWithDeadline({ path }, X_REQUEST_TIMEOUT_MS, () => new Error('timed out'));
}
