/**
 * The HTTP/1.1 proxy wire details the egress needs, as pure functions: reading request targets
 * (`CONNECT host:port`, absolute-form URIs, `Host` headers), deciding how a request body is
 * framed (RFC 9112 §6), dropping hop-by-hop headers on the way through (RFC 9110 §7.6.1), and
 * writing a response on a raw socket (after CONNECT or an upgrade, Node's HTTP server has let go
 * of the socket).
 */
import { STATUS_CODES } from 'node:http';
import { normalizeHost } from './policy.js';

export interface Authority {
  /** As `normalizeHost` spells it: lower case, no brackets around IPv6, no trailing dot. */
  host: string;
  port: number;
}

const bracketed = (host: string) => (host.includes(':') ? `[${host}]` : host);
/** `host:port` for logs and messages (IPv6 in brackets). */
export const label = (t: Authority) => `${bracketed(t.host)}:${t.port}`;
/** The `Host` header a client should have sent for `t`. */
export const hostHeader = (t: Authority) => (t.port === 80 ? bracketed(t.host) : label(t));

function parsePort(s: string): number | undefined {
  if (!/^\d{1,5}$/.test(s)) return undefined;
  const port = Number(s);
  return port >= 1 && port <= 65535 ? port : undefined;
}

/**
 * `host:port` or `[v6]:port` (a CONNECT target; a `Host` header when `defaultPort` is given, which
 * makes the port optional). `undefined` when malformed.
 */
export function parseAuthority(text: string, defaultPort?: number): Authority | undefined {
  const m = /^(\[[^\]]*\]|[^:[\]]*)(?::(\d*))?$/.exec(text.trim());
  if (!m) return undefined;
  const port = m[2] === undefined ? defaultPort : parsePort(m[2]);
  const host = normalizeHost(m[1]!);
  if (port === undefined || host === undefined) return undefined;
  return { host, port };
}

export interface ProxyTarget extends Authority {
  /** Origin-form target for the upstream request: path and query, never empty. */
  path: string;
}

/**
 * An absolute-form request target (`http://host:port/path?q`; `ws:` is read as `http:`, as some
 * WebSocket clients send it). `undefined` for origin-form (`/path`), `*`, other schemes (`https:`
 * belongs in a CONNECT tunnel) and anything malformed. User info is dropped.
 */
export function parseProxyTarget(url: string): ProxyTarget | undefined {
  if (!/^(http|ws):\/\//i.test(url)) return undefined;
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return undefined;
  }
  const host = normalizeHost(u.hostname);
  const port = u.port === '' ? 80 : Number(u.port);
  if (host === undefined || !(port >= 1 && port <= 65535)) return undefined;
  return { host, port, path: `${u.pathname || '/'}${u.search}` };
}

/** Headers that describe one connection, never forwarded: RFC 9110 §7.6.1 plus the legacy ones. */
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
]);

/**
 * `raw` (a `rawHeaders` list: name, value, name, value…) without hop-by-hop headers, headers the
 * `Connection` header names, `Proxy-*` (credentials for this proxy go no further) and `Expect`
 * (this proxy has already answered it). With `upgrade`, `Upgrade` is kept and `Connection` becomes
 * just `Upgrade`, as a protocol switch needs both to reach the origin.
 */
export function forwardHeaders(raw: readonly string[], opts: { upgrade?: boolean } = {}): string[] {
  const named = new Set<string>();
  for (let i = 0; i + 1 < raw.length; i += 2) {
    if (raw[i]!.toLowerCase() === 'connection') {
      for (const token of raw[i + 1]!.split(',')) named.add(token.trim().toLowerCase());
    }
  }
  const out: string[] = [];
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = raw[i]!;
    const lower = name.toLowerCase();
    if (opts.upgrade && lower === 'upgrade') {
      out.push(name, raw[i + 1]!);
      continue;
    }
    if (HOP_BY_HOP.has(lower) || named.has(lower) || lower.startsWith('proxy-')) continue;
    if (lower === 'expect') continue;
    out.push(name, raw[i + 1]!);
  }
  if (opts.upgrade) out.push('Connection', 'Upgrade');
  return out;
}

/** How a request's body is delimited: none, `Content-Length` bytes, or chunked. */
export type Framing = { kind: 'none' } | { kind: 'length'; length: number } | { kind: 'chunked' };

const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
// field-value: visible ASCII, obs-text, space and tab (no CR, LF, NUL or other controls)
// eslint-disable-next-line no-control-regex
const BAD_VALUE = /[\u0000-\u0008\u000a-\u001f\u007f]/;

/**
 * The framing of a request's body, read strictly from its head (`rawHeaders`, as Node parsed
 * them), or a reason to refuse it. The egress forwards a body only with the framing decided here,
 * whatever the method, so the bytes after one request can never be read upstream as another
 * (request smuggling). Refused: a malformed header name or value, `Transfer-Encoding` together
 * with `Content-Length`, in an HTTP/1.0 request or not ending in `chunked`, and `Content-Length`
 * that is not one decimal number (also when repeated).
 */
export function requestFraming(
  httpVersion: string,
  raw: readonly string[],
): Framing | { refused: string } {
  for (let i = 0; i + 1 < raw.length; i += 2) {
    if (!TOKEN.test(raw[i]!)) return { refused: 'malformed header name' };
    if (BAD_VALUE.test(raw[i + 1]!)) return { refused: `malformed ${raw[i]} header` };
  }
  const te = headerValues(raw, 'transfer-encoding');
  const cl = headerValues(raw, 'content-length');
  if (te.length > 0) {
    if (cl.length > 0) return { refused: 'both Transfer-Encoding and Content-Length' };
    if (httpVersion !== '1.1') return { refused: `Transfer-Encoding in HTTP/${httpVersion}` };
    const codings = te
      .join(',')
      .split(',')
      .map((c) => c.trim().toLowerCase());
    if (codings.at(-1) !== 'chunked' || codings.indexOf('chunked') !== codings.length - 1) {
      return { refused: 'Transfer-Encoding must end in chunked, once' };
    }
    return { kind: 'chunked' };
  }
  if (cl.length === 0) return { kind: 'none' };
  if (cl.length > 1 || !/^\d{1,15}$/.test(cl[0]!)) return { refused: 'malformed Content-Length' };
  const length = Number(cl[0]);
  return length === 0 ? { kind: 'none' } : { kind: 'length', length };
}

/** Values of every header called `name` in a `rawHeaders` list. */
export function headerValues(raw: readonly string[], name: string): string[] {
  const out: string[] = [];
  for (let i = 0; i + 1 < raw.length; i += 2) {
    if (raw[i]!.toLowerCase() === name) out.push(raw[i + 1]!);
  }
  return out;
}

/** A complete response head for a raw socket; `raw` is a `rawHeaders` list. */
export function responseHead(status: number, reason: string, raw: readonly string[]): string {
  let head = `HTTP/1.1 ${status} ${reason.replace(/[\r\n]/g, ' ')}\r\n`;
  for (let i = 0; i + 1 < raw.length; i += 2) {
    head += `${raw[i]!}: ${raw[i + 1]!.replace(/[\r\n]/g, ' ')}\r\n`;
  }
  return `${head}\r\n`;
}

/** A short plain-text response that closes the connection: `status`, `code` and `message`. */
export function plainResponse(status: number, code: string, message: string): string {
  const body = `burrow egress: ${code}: ${message}\n`;
  return (
    responseHead(status, STATUS_CODES[status] ?? 'Error', [
      'Content-Type',
      'text/plain; charset=utf-8',
      'Content-Length',
      String(Buffer.byteLength(body)),
      'Connection',
      'close',
      'X-Burrow-Egress',
      code,
    ]) + body
  );
}
