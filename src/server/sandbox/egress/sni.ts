/**
 * Reads the server names (SNI, RFC 6066) out of the first bytes a client sends through a tunnel,
 * so the egress can refuse a TLS connection to an allowed address that names a blocked domain
 * (domain fronting). Pure: bytes in, verdict out; the caller buffers and calls again with more.
 *
 * The ClientHello may be split over TCP segments and over TLS records (a handshake message may be
 * fragmented across records); both are reassembled. Anything that starts like TLS but does not
 * parse as a ClientHello is `invalid`, so the caller can fail closed: the servers that matter
 * (OpenSSL, BoringSSL) refuse such hellos too, so no working connection is lost.
 */

/** Largest ClientHello accepted, in bytes of handshake message (real ones are under 2 KiB). */
export const MAX_CLIENT_HELLO_BYTES = 16 * 1024;

const RECORD_HANDSHAKE = 0x16;
const HANDSHAKE_CLIENT_HELLO = 0x01;
const EXT_SERVER_NAME = 0x0000;
const NAME_TYPE_HOST = 0x00;
const MAX_RECORD_FRAGMENT = 16 * 1024;

export type ClientHelloSniff =
  /** Starts like TLS, but the ClientHello is not complete yet: call again with more bytes. */
  | { kind: 'incomplete' }
  /** The first byte is not a TLS handshake record: some other protocol, nothing to check. */
  | { kind: 'not-tls' }
  /** Starts like TLS but is not a well-formed ClientHello. */
  | { kind: 'invalid'; reason: string }
  /** Complete ClientHello; `serverNames` is empty when it carries no SNI. */
  | { kind: 'client-hello'; serverNames: string[] };

class Malformed extends Error {}

/** A bounds-checked big-endian reader over one message. */
class Reader {
  #pos = 0;
  constructor(private readonly buf: Uint8Array) {}
  get remaining(): number {
    return this.buf.length - this.#pos;
  }
  bytes(n: number, what: string): Uint8Array {
    if (n > this.remaining) throw new Malformed(`truncated ${what}`);
    const out = this.buf.subarray(this.#pos, this.#pos + n);
    this.#pos += n;
    return out;
  }
  u8(what: string): number {
    return this.bytes(1, what)[0]!;
  }
  u16(what: string): number {
    const b = this.bytes(2, what);
    return (b[0]! << 8) | b[1]!;
  }
  u24(what: string): number {
    const b = this.bytes(3, what);
    return (b[0]! << 16) | (b[1]! << 8) | b[2]!;
  }
  /** A vector with a `lenBytes`-byte length prefix, as its own reader. */
  vector(lenBytes: 1 | 2, what: string): Reader {
    const n = lenBytes === 1 ? this.u8(what) : this.u16(what);
    return new Reader(this.bytes(n, what));
  }
}

/**
 * Sniff the start of a client's byte stream. `data` is everything received so far; the answer is
 * `incomplete` until the whole ClientHello is there (bytes after it are ignored).
 */
export function sniffClientHello(data: Uint8Array): ClientHelloSniff {
  if (data.length === 0) return { kind: 'incomplete' };
  if (data[0] !== RECORD_HANDSHAKE) return { kind: 'not-tls' };
  try {
    const message = reassemble(data);
    return message === undefined
      ? { kind: 'incomplete' }
      : { kind: 'client-hello', serverNames: parseClientHello(message) };
  } catch (err) {
    // Anything else would be a bug here; still an answer, never an exception for the caller.
    return { kind: 'invalid', reason: err instanceof Malformed ? err.message : 'unparseable' };
  }
}

/** The first handshake message, joined from as many records as it spans; undefined if partial. */
function reassemble(data: Uint8Array): Uint8Array | undefined {
  const fragments: Uint8Array[] = [];
  let have = 0;
  let need: number | undefined; // total message length, header included, once known
  let pos = 0;
  for (;;) {
    if (data.length - pos < 5) return undefined;
    const type = data[pos]!;
    const major = data[pos + 1]!;
    const length = (data[pos + 3]! << 8) | data[pos + 4]!;
    if (type !== RECORD_HANDSHAKE)
      throw new Malformed(`record type ${type} inside the ClientHello`);
    if (major !== 3) throw new Malformed(`record version ${major}.${data[pos + 2]!}`);
    if (length === 0 || length > MAX_RECORD_FRAGMENT) {
      throw new Malformed(`record length ${length}`);
    }
    const fragment = data.subarray(pos + 5, Math.min(data.length, pos + 5 + length));
    fragments.push(fragment);
    have += fragment.length;
    if (need === undefined && have >= 4) {
      const head = concat(fragments, 4);
      if (head[0] !== HANDSHAKE_CLIENT_HELLO) {
        throw new Malformed(`handshake type ${head[0]!}, not ClientHello`);
      }
      const bodyLength = (head[1]! << 16) | (head[2]! << 8) | head[3]!;
      if (bodyLength > MAX_CLIENT_HELLO_BYTES) {
        throw new Malformed(`ClientHello of ${bodyLength} bytes`);
      }
      need = 4 + bodyLength;
    }
    if (need !== undefined && have >= need) return concat(fragments, need).subarray(4);
    if (fragment.length < length) return undefined; // this record is still arriving
    pos += 5 + length;
  }
}

function concat(parts: Uint8Array[], n: number): Uint8Array {
  const out = new Uint8Array(n);
  let at = 0;
  for (const p of parts) {
    if (at >= n) break;
    const take = p.subarray(0, n - at);
    out.set(take, at);
    at += take.length;
  }
  return out;
}

/** The host names of a ClientHello body (after the 4-byte handshake header). */
function parseClientHello(body: Uint8Array): string[] {
  const r = new Reader(body);
  const major = r.u8('version');
  r.u8('version');
  if (major !== 3) throw new Malformed(`ClientHello version ${major}`);
  r.bytes(32, 'random');
  if (r.vector(1, 'session id').remaining > 32) throw new Malformed('session id over 32 bytes');
  const suites = r.vector(2, 'cipher suites').remaining;
  if (suites === 0 || suites % 2 !== 0) throw new Malformed('cipher suites');
  if (r.vector(1, 'compression methods').remaining === 0) {
    throw new Malformed('no compression method');
  }
  if (r.remaining === 0) return []; // no extensions at all (TLS 1.0-1.2 allow it)
  const extensions = r.vector(2, 'extensions');
  if (r.remaining !== 0) throw new Malformed('bytes after the extensions');
  const seen = new Set<number>();
  let names: string[] = [];
  while (extensions.remaining > 0) {
    const type = extensions.u16('extension type');
    const ext = extensions.vector(2, 'extension');
    // A second copy could be read differently by the server than by us: refuse, as servers do.
    if (seen.has(type)) throw new Malformed(`duplicate extension ${type}`);
    seen.add(type);
    if (type === EXT_SERVER_NAME) names = parseServerNames(ext);
  }
  return names;
}

function parseServerNames(ext: Reader): string[] {
  const list = ext.vector(2, 'server name list');
  if (ext.remaining !== 0) throw new Malformed('bytes after the server name list');
  if (list.remaining === 0) throw new Malformed('empty server name list');
  const names: string[] = [];
  while (list.remaining > 0) {
    const nameType = list.u8('server name type');
    const name = list.vector(2, 'server name');
    if (nameType !== NAME_TYPE_HOST) continue;
    const bytes = name.bytes(name.remaining, 'server name');
    // RFC 6066: ASCII host name, no trailing dot. Control bytes, spaces and non-ASCII are refused
    // rather than guessed at.
    if (bytes.length === 0 || bytes.some((b) => b < 0x21 || b > 0x7e)) {
      throw new Malformed('server name is not a printable ASCII host name');
    }
    names.push(String.fromCharCode(...bytes));
  }
  return names;
}
