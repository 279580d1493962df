/**
 * The client side of an upstream proxy the egress chains to (`proxy` of `POST /v1/start`): an
 * HTTP proxy reached with `CONNECT` (RFC 9110 §9.3.6, `Proxy-Authorization: Basic`), the same over
 * TLS (`https://`), or a SOCKS5 proxy (RFC 1928, with the username/password method of RFC 1929).
 *
 * Only what the egress needs: open one tunnel to one `host:port` over a socket already connected
 * to the upstream, then step aside (the socket carries the tunnel). Names are sent as names, so the
 * upstream resolves them in its own network (as Chromium does with a SOCKS5 proxy).
 *
 * Credentials live in the `UpstreamProxy` value only: nothing here writes them anywhere, and every
 * message names the upstream by `upstreamLabel` (scheme, host and port).
 */
import type net from 'node:net';
import { isIP } from 'node:net';
import { parseProxyServer, type ProxyScheme, type ProxySettings } from '../../../api/index.js';
import { normalizeHost } from './policy.js';

export type UpstreamScheme = ProxyScheme;

export interface UpstreamProxy {
  readonly scheme: UpstreamScheme;
  /** As `normalizeHost` spells it. */
  readonly host: string;
  readonly port: number;
  readonly username?: string | undefined;
  readonly password?: string | undefined;
  /** Hosts reached directly, not through the upstream (each with its subdomains). */
  readonly bypass: readonly string[];
}

/** What `POST /v1/start` takes as `proxy` (validated by its schema before it gets here). */
export type UpstreamSettings = ProxySettings;

/**
 * Read `server` with the API's own reader (`parseProxyServer`, which the start schema checked it
 * with), its host reduced to the one spelling `normalizeHost` gives. A reason when it is no proxy
 * address this egress can use.
 */
export function parseUpstreamServer(
  server: string,
): { scheme: UpstreamScheme; host: string; port: number } | { error: string } {
  const parsed = parseProxyServer(server);
  if ('error' in parsed) return parsed;
  const host = normalizeHost(parsed.host);
  if (host === undefined) return { error: 'has no valid host' };
  return { ...parsed, host };
}

/** The bypass list as entries: comma- or semicolon-separated, `*.` and leading dots dropped. */
export function parseBypass(bypass: string | undefined): string[] {
  if (bypass === undefined) return [];
  const out: string[] = [];
  for (const part of bypass.split(/[,;\s]+/)) {
    const bare = part.replace(/^\*?\.+/, '');
    const host = bare === '' ? undefined : normalizeHost(bare);
    if (host !== undefined) out.push(host);
  }
  return out;
}

/** `UpstreamProxy` from validated settings, or a reason naming what is wrong with `server`. */
export function upstreamFromSettings(p: UpstreamSettings): UpstreamProxy | { error: string } {
  const server = parseUpstreamServer(p.server);
  if ('error' in server) return server;
  return {
    ...server,
    username: p.username,
    password: p.password,
    bypass: parseBypass(p.bypass),
  };
}

/** How the upstream is named in messages and logs: never with its credentials. */
export function upstreamLabel(u: Pick<UpstreamProxy, 'scheme' | 'host' | 'port'>): string {
  return `${u.scheme}://${u.host.includes(':') ? `[${u.host}]` : u.host}:${u.port}`;
}

/** Whether `host` is reached directly: it or a parent domain is on the bypass list. */
export function bypasses(u: UpstreamProxy, host: string): boolean {
  const h = normalizeHost(host);
  if (h === undefined || u.bypass.length === 0) return false;
  return u.bypass.some((b) => h === b || (isIP(h) === 0 && h.endsWith(`.${b}`)));
}

/**
 * - `proxy_unreachable`: no connection to the upstream, or it broke off the handshake;
 * - `proxy_auth_failed`: it refused the credentials (HTTP 407, SOCKS5 auth failure or no
 *   acceptable method);
 * - `proxy_failed`: it took the credentials but did not reach the target (its own refusal or
 *   failure).
 */
export type UpstreamFailureCode = 'proxy_unreachable' | 'proxy_auth_failed' | 'proxy_failed';

export class UpstreamFailure extends Error {
  constructor(
    readonly code: UpstreamFailureCode,
    message: string,
  ) {
    super(message);
  }
}

/** Largest response head accepted from an HTTP upstream, in bytes. */
const MAX_HEAD_BYTES = 16 * 1024;

/**
 * Reads a handshake off a socket a piece at a time; `finish` hands back what came after it (the
 * tunnel's first bytes) and leaves the socket paused and untouched otherwise.
 */
class HandshakeReader {
  #buf: Buffer = Buffer.alloc(0);
  #wait: { take: (b: Buffer) => number | undefined; done: (b: Buffer) => void } | undefined;
  #failed: Error | undefined;
  #fail: ((err: Error) => void) | undefined;
  readonly #socket: net.Socket;
  readonly #onData = (chunk: Buffer) => {
    this.#buf = this.#buf.length === 0 ? chunk : Buffer.concat([this.#buf, chunk]);
    this.#pump();
  };
  readonly #onGone = () => this.#abort(new Error('closed'));
  readonly #onError = (err: Error) => this.#abort(err);

  constructor(socket: net.Socket, what: string) {
    this.#socket = socket;
    this.what = what;
    socket.on('data', this.#onData);
    socket.on('end', this.#onGone);
    socket.on('close', this.#onGone);
    socket.on('error', this.#onError);
  }

  readonly what: string;

  #abort(err: Error): void {
    this.#failed ??= err;
    const fail = this.#fail;
    this.#wait = undefined;
    this.#fail = undefined;
    fail?.(err);
  }

  #pump(): void {
    const w = this.#wait;
    if (!w) return;
    const n = w.take(this.#buf);
    if (n === undefined) return;
    const piece = this.#buf.subarray(0, n);
    this.#buf = this.#buf.subarray(n);
    this.#wait = undefined;
    this.#fail = undefined;
    w.done(piece);
  }

  /** The next piece: `take` says how many bytes of what has arrived make it, or not yet. */
  read(take: (b: Buffer) => number | undefined): Promise<Buffer> {
    return new Promise((resolve, reject) => {
      if (this.#failed) return reject(this.#failed);
      this.#wait = { take, done: resolve };
      this.#fail = reject;
      this.#pump();
    });
  }

  exactly(n: number): Promise<Buffer> {
    return this.read((b) => (b.length >= n ? n : undefined));
  }

  /** Stop reading; what arrived after the handshake goes back to the socket. */
  finish(): void {
    const s = this.#socket;
    s.off('data', this.#onData);
    s.off('end', this.#onGone);
    s.off('close', this.#onGone);
    s.off('error', this.#onError);
    s.pause();
    if (this.#buf.length > 0) s.unshift(this.#buf);
  }
}

const basic = (u: UpstreamProxy) =>
  Buffer.from(`${u.username ?? ''}:${u.password ?? ''}`, 'utf8').toString('base64');

const bracket = (host: string) => (host.includes(':') ? `[${host}]` : host);

async function connectHttp(
  socket: net.Socket,
  u: UpstreamProxy,
  target: { host: string; port: number },
): Promise<void> {
  const authority = `${bracket(target.host)}:${target.port}`;
  let head = `CONNECT ${authority} HTTP/1.1\r\nHost: ${authority}\r\n`;
  if (u.username !== undefined) head += `Proxy-Authorization: Basic ${basic(u)}\r\n`;
  head += '\r\n';
  const reader = new HandshakeReader(socket, 'http');
  socket.write(head);
  let answer: Buffer;
  try {
    answer = await reader.read((b) => {
      const end = b.indexOf('\r\n\r\n');
      if (end >= 0) return end + 4;
      if (b.length > MAX_HEAD_BYTES) return b.length; // read whole, refused below
      return undefined;
    });
  } catch (err) {
    throw new UpstreamFailure(
      'proxy_unreachable',
      `${upstreamLabel(u)} closed the connection before answering CONNECT ${authority} (${(err as Error).message})`,
    );
  }
  reader.finish();
  const status = /^HTTP\/1\.[01] (\d{3})/.exec(answer.toString('latin1'));
  if (!status) {
    throw new UpstreamFailure('proxy_unreachable', `${upstreamLabel(u)} does not speak HTTP`);
  }
  const code = Number(status[1]);
  if (code >= 200 && code < 300) return;
  // 407 is the proxy's own answer; some (tinyproxy) answer a CONNECT 401 instead
  if (code === 407 || code === 401) {
    throw new UpstreamFailure(
      'proxy_auth_failed',
      `${upstreamLabel(u)} refused the credentials (${code})${u.username === undefined ? ' (none were given)' : ''}`,
    );
  }
  throw new UpstreamFailure(
    'proxy_failed',
    `${upstreamLabel(u)} answered ${code} to CONNECT ${authority}`,
  );
}

const SOCKS_REPLIES: Record<number, string> = {
  1: 'general failure',
  2: 'not allowed by its rules',
  3: 'network unreachable',
  4: 'host unreachable',
  5: 'connection refused',
  6: 'TTL expired',
  7: 'command not supported',
  8: 'address type not supported',
};

/**
 * The SOCKS5 greeting and, when the proxy picks it, the username/password sub-negotiation. Ends
 * authenticated or throws; `reader` goes on to the request.
 */
async function socksAuthenticate(
  socket: net.Socket,
  reader: HandshakeReader,
  u: UpstreamProxy,
): Promise<void> {
  const withCredentials = u.username !== undefined;
  // offer "no authentication" only when we hold no credentials, so a proxy cannot skip them
  socket.write(Uint8Array.from(withCredentials ? [5, 1, 2] : [5, 1, 0]));
  const choice = await reader.exactly(2);
  if (choice[0] !== 5) {
    throw new UpstreamFailure('proxy_unreachable', `${upstreamLabel(u)} does not speak SOCKS5`);
  }
  if (choice[1] === 0xff) {
    throw new UpstreamFailure(
      'proxy_auth_failed',
      withCredentials
        ? `${upstreamLabel(u)} accepts no username/password authentication`
        : `${upstreamLabel(u)} requires authentication (no username was given)`,
    );
  }
  if (choice[1] === 0 && !withCredentials) return;
  if (choice[1] !== 2 || !withCredentials) {
    throw new UpstreamFailure('proxy_unreachable', `${upstreamLabel(u)} chose an unknown method`);
  }
  const user = Buffer.from(u.username ?? '', 'utf8');
  const pass = Buffer.from(u.password ?? '', 'utf8');
  if (user.length > 255 || pass.length > 255) {
    throw new UpstreamFailure('proxy_auth_failed', 'SOCKS5 credentials are limited to 255 bytes');
  }
  socket.write(
    Buffer.concat([Uint8Array.from([1, user.length]), user, Uint8Array.of(pass.length), pass]),
  );
  const status = await reader.exactly(2);
  if (status[1] !== 0) {
    throw new UpstreamFailure('proxy_auth_failed', `${upstreamLabel(u)} refused the credentials`);
  }
}

function socksAddress(host: string): Buffer {
  const family = isIP(host);
  if (family === 4) return Buffer.from([1, ...host.split('.').map(Number)]);
  if (family === 6) {
    // expand `::` to eight words
    const [head, tail] = host.includes('::') ? host.split('::') : [host, undefined];
    const h = head ? head.split(':') : [];
    const t = tail ? tail.split(':') : [];
    const words = [...h, ...new Array<string>(8 - h.length - t.length).fill('0'), ...t];
    const out = Buffer.alloc(17);
    out[0] = 4;
    words.forEach((w, i) => out.writeUInt16BE(parseInt(w, 16), 1 + i * 2));
    return out;
  }
  const name = Buffer.from(host, 'ascii');
  return Buffer.concat([Uint8Array.from([3, name.length]), name]);
}

async function connectSocks(
  socket: net.Socket,
  u: UpstreamProxy,
  target: { host: string; port: number },
): Promise<void> {
  const reader = new HandshakeReader(socket, 'socks5');
  const authority = `${bracket(target.host)}:${target.port}`;
  try {
    await socksAuthenticate(socket, reader, u);
    const port = Buffer.alloc(2);
    port.writeUInt16BE(target.port);
    socket.write(Buffer.concat([Uint8Array.from([5, 1, 0]), socksAddress(target.host), port]));
    const reply = await reader.read((b) => {
      if (b.length < 5) return undefined;
      const len = b[3] === 1 ? 4 : b[3] === 4 ? 16 : b[3] === 3 ? 1 + b[4]! : 0;
      return b.length >= 4 + len + 2 ? 4 + len + 2 : undefined;
    });
    if (reply[0] !== 5) {
      throw new UpstreamFailure('proxy_unreachable', `${upstreamLabel(u)} does not speak SOCKS5`);
    }
    if (reply[1] !== 0) {
      const why = SOCKS_REPLIES[reply[1]!] ?? `reply ${reply[1]}`;
      throw new UpstreamFailure(
        'proxy_failed',
        `${upstreamLabel(u)} could not reach ${authority}: ${why}`,
      );
    }
  } catch (err) {
    if (err instanceof UpstreamFailure) throw err;
    throw new UpstreamFailure(
      'proxy_unreachable',
      `${upstreamLabel(u)} closed the connection during the SOCKS5 handshake (${(err as Error).message})`,
    );
  }
  reader.finish();
}

/**
 * Turn `socket`, connected to the upstream (over TLS already for `https`), into a tunnel to
 * `target`. Throws an `UpstreamFailure`; the caller owns the socket either way and applies its
 * deadline.
 */
export async function openTunnel(
  socket: net.Socket,
  u: UpstreamProxy,
  target: { host: string; port: number },
): Promise<void> {
  if (u.scheme === 'socks5') await connectSocks(socket, u, target);
  else await connectHttp(socket, u, target);
}

/**
 * Check the credentials of a SOCKS5 upstream without asking for any target (the greeting and the
 * sub-negotiation only), for the probe at start. HTTP proxies have no such step: their answer to
 * credentials comes with the first CONNECT.
 */
export async function socksCredentialsCheck(socket: net.Socket, u: UpstreamProxy): Promise<void> {
  const reader = new HandshakeReader(socket, 'socks5');
  try {
    await socksAuthenticate(socket, reader, u);
  } catch (err) {
    if (err instanceof UpstreamFailure) throw err;
    throw new UpstreamFailure(
      'proxy_unreachable',
      `${upstreamLabel(u)} closed the connection during the SOCKS5 handshake (${(err as Error).message})`,
    );
  } finally {
    reader.finish();
  }
}
