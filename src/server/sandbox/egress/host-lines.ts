/**
 * The `Host` rule inside a tunnel that does not carry TLS. A `CONNECT` to an allowed address can
 * carry plain HTTP whose `Host` header (or absolute-form request line) names a blocked domain; the
 * same request sent to the proxy is refused, so the tunnel must refuse it too, and not only in its
 * first request: every request of a keep-alive tunnel is another chance.
 *
 * Rather than parse HTTP framing (a tunnel may carry any protocol), every line the client sends
 * through a non-TLS tunnel is looked at (a line ends at LF or CR): one that reads as a `Host`
 * header or as a request line with an absolute URI names a host, and a blocked one ends the
 * tunnel before its line end reaches the upstream. Bytes are never held back: a line's start may
 * pass before its end arrives, but no server acts on a header line, let alone a request head,
 * before its end. A body that happens to hold such a line naming a blocked domain ends the tunnel
 * too: the rule errs on the side of refusing. The first `MAX_LINE` bytes of a line are read; a
 * longer line that starts like a naming one is refused.
 */
import { parseAuthority } from './proxy-http.js';

/** Bytes of a line read to find the host it names. */
export const MAX_LINE = 8 * 1024;

const HOST_LINE = /^host[ \t]*:[ \t]*([^\r\n]*?)[ \t]*$/i;
const ABSOLUTE_REQUEST = /^[A-Z]+[ \t]+[A-Za-z][A-Za-z0-9+.-]*:\/\/([^/?#\s]*)/;
/** The start of a line that may name a host once it is whole. */
const NAMING_START = /^(?:host[ \t]*:|[A-Z]+[ \t]+[A-Za-z][A-Za-z0-9+.-]*:\/\/)/i;

/** What may pass on now, or the host a line names that the blocked domains refuse. */
export type LineVerdict = { pass: Buffer } | { blocked: string };

/** The host a whole line names (`Host:` header or absolute-form request line), if any. */
export function namedHost(line: string): string | undefined {
  const m = HOST_LINE.exec(line) ?? ABSOLUTE_REQUEST.exec(line);
  if (!m) return undefined;
  // the line's bytes as UTF-8 (a host may be an IDN, or spell a dot as `。`), `%XX` decoded (a
  // URL parser decodes a host's escapes: `blocked%2etest`)
  const text = percentDecoded(Buffer.from(m[1]!, 'latin1').toString('utf8'));
  // what a URL parser takes for the host: the text before any path, query or fragment (a
  // server that reads `Host: blocked.test/x` as a URL's authority serves `blocked.test`), after
  // any user info
  const before = text.split(/[/?#\\]/)[0]!;
  const authority = before.slice(before.lastIndexOf('@') + 1);
  // an authority that does not parse is judged by its host, the text before any port (nginx
  // serves `Host: blocked.test:x` as `blocked.test`), and that up to the first character no host
  // name holds (`blocked.test;`, `blocked.test,x`, a control character), else by its whole text
  // (normalizeHost in the matcher)
  const parsed = parseAuthority(authority, 80)?.host;
  if (parsed !== undefined) return parsed;
  const host = authority.replace(/^(\[[^\]]*\]|[^:]*):.*$/s, '$1');
  return /^(\[[^\]]*\]|[^\0-\x20\x7f"%<>^|;,`{}]*)/.exec(host)![1];
}

/** `text` with its `%XX` escapes decoded as UTF-8 (an escape that is not one stays as it is). */
function percentDecoded(text: string): string {
  if (!text.includes('%')) return text;
  try {
    return decodeURIComponent(text.replace(/%(?![0-9A-Fa-f]{2})/g, '%25'));
  } catch {
    return text;
  }
}

/** Where the next line end (LF or CR) is at or after `from`, else -1. */
function lineEnd(chunk: Buffer, from: number): number {
  const lf = chunk.indexOf(0x0a, from);
  const cr = chunk.indexOf(0x0d, from);
  return lf < 0 ? cr : cr < 0 ? lf : Math.min(lf, cr);
}

/** Watches one tunnel's client-to-upstream bytes, line by line. */
export class HostLines {
  readonly #blocked: (name: string) => string | undefined;
  /** The last line that was not empty was a `Host` header (or continued one). */
  #afterHost = false;
  /** The current line's first bytes, as far as read (latin1). */
  #line = '';
  /** The current line cannot name a host (its first byte says so): not read further. */
  #skip = false;
  /** The current line is longer than `MAX_LINE`. */
  #long = false;

  constructor(blocked: (name: string) => string | undefined) {
    this.#blocked = blocked;
  }

  /** Take `chunk`: all of it may pass, or the blocked host one of its lines names. */
  feed(chunk: Buffer): LineVerdict {
    let start = 0;
    for (;;) {
      const end = lineEnd(chunk, start);
      this.#read(chunk.subarray(start, end < 0 ? chunk.length : end));
      if (this.#long && NAMING_START.test(this.#line)) {
        return { blocked: `a line of more than ${MAX_LINE} bytes naming a host` };
      }
      if (end < 0) return { pass: chunk };
      const hit = this.#check();
      if (hit !== undefined) return { blocked: hit };
      start = end + 1;
    }
  }

  /** The client ended: its last line, if it had no end, is checked as a whole one. */
  end(): LineVerdict {
    const hit = this.#check();
    return hit === undefined ? { pass: Buffer.alloc(0) } : { blocked: hit };
  }

  #read(piece: Buffer): void {
    if (this.#skip || this.#long || piece.length === 0) return;
    if (this.#line === '') {
      const first = piece[0]!;
      // only lines that can name a host are read: `H`/`h`, a method's first letter, or after a
      // `Host` line one that continues it (obs-fold: it starts with a space or a tab)
      const folded = (first === 0x20 || first === 0x09) && this.#afterHost;
      this.#skip = !(folded || (first >= 0x41 && first <= 0x5a) || first === 0x68);
      if (this.#skip) return;
    }
    const room = MAX_LINE - this.#line.length;
    this.#line += piece.subarray(0, room).toString('latin1');
    this.#long = piece.length > room;
  }

  /** The blocked host the line now ended names, if any; starts the next line. */
  #check(): string | undefined {
    const line = this.#line;
    const skipped = this.#skip;
    this.#line = '';
    this.#skip = false;
    this.#long = false;
    // an empty line is also what lies between a CR and its LF: it ends no header
    if (line === '' && !skipped) return undefined;
    if (/^[ \t]/.test(line)) {
      // a folded `Host` value: a lenient server may take any of its words for the host
      for (const word of line.trim().split(/[ \t]+/)) {
        const name = namedHost(`Host: ${word}`);
        if (name !== undefined && this.#blocked(name) !== undefined) return name;
      }
      return undefined;
    }
    this.#afterHost = HOST_LINE.test(line);
    const name = line === '' ? undefined : namedHost(line);
    return name !== undefined && this.#blocked(name) !== undefined ? name : undefined;
  }
}
