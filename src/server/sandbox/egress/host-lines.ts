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

/**
 * A `Host` header's name and colon. Its value is cut out by hand (hostValue): a pattern that
 * trims the value's spaces backtracks over them, quadratic in a line of spaces.
 */
const HOST_FIELD = /^host[ \t]*:/i;
/**
 * A request line whose target names a host: the absolute form (`GET http://host/`), or a target
 * a URL parser resolves to another host (`GET //host/`, `/\host`, `http:\\host`: two slashes,
 * either way round, start an authority), also once a server decoded its escapes (`/%2f%2fhost`)
 * or read a URL in its path (`/http://host/`, as rewriting fronts do).
 */
const NAMING_REQUEST =
  /^[A-Z]+[ \t]+(?:\/?[A-Za-z][A-Za-z0-9+.-]*:)?(?:[/\\]|%2[fF]|%5[cC]){2,}([^/?#\\\s]*)/;
/**
 * HTTP/2 in the clear, by prior knowledge (its preface) or by upgrade: its requests name their
 * host in binary frames, on no line, so a tunnel that carries it cannot be held to the rule.
 */
const CLEARTEXT_H2 = /^(?:PRI \* HTTP\/2\.0$|upgrade[ \t]*:.*\bh2c\b)/i;
/**
 * Headers a server behind a proxy or a rewriting front may take for the request's host, in place
 * of `Host`: each host they name must pass the rule too. Most hold a host (a list of them);
 * `X-Original-URL` and `X-Rewrite-URL` a URL, whose host counts where it names one.
 */
export const FORWARDING_HEADERS = [
  'x-forwarded-host',
  'x-original-host',
  'x-host',
  'x-forwarded-server',
  'x-http-host-override',
  'x-host-override',
  'x-original-url',
  'x-rewrite-url',
  'forwarded',
] as const;
const FORWARDING_FIELD = new RegExp(`^(${FORWARDING_HEADERS.join('|')})[ \\t]*:`, 'i');
/** The start of a line that may name a host once it is whole (or switch to HTTP/2). */
const NAMING_START = new RegExp(
  `^(?:host[ \\t]*:|upgrade[ \\t]*:|${FORWARDING_HEADERS.map((h) => `${h}[ \\t]*:`).join('|')}|PRI \\* |[A-Z]+[ \\t]+(?:\\/?[A-Za-z][A-Za-z0-9+.-]*:)?(?:[/\\\\]|%2f|%5c){2})`,
  'i',
);

/**
 * The hosts a forwarding header's value names: each element of `X-Forwarded-Host` (and its
 * kin), a list; each `host=` of `Forwarded` (RFC 7239), quoted or not; the host of the URL in
 * `X-Original-URL` or `X-Rewrite-URL`, where it names one (`http://host/`, `//host/`).
 */
export function forwardedHosts(field: string, value: string): string[] {
  const name = field.toLowerCase();
  if (name === 'x-original-url' || name === 'x-rewrite-url') {
    const host = NAMING_REQUEST.exec(`GET ${value.trim()}`)?.[1];
    return host ? [host] : [];
  }
  if (name !== 'forwarded') {
    return value
      .split(',')
      .map((v) => v.trim())
      .filter(Boolean);
  }
  const hosts: string[] = [];
  for (const pair of value.split(/[,;]/)) {
    const host = /^\s*host\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s"]*))\s*$/i.exec(pair);
    if (host) hosts.push((host[1] ?? host[2]!).replace(/\\(.)/g, '$1'));
  }
  return hosts.filter(Boolean);
}

/** The value of a `Host` header line, without the spaces and tabs around it; else undefined. */
function hostValue(line: string): string | undefined {
  const field = HOST_FIELD.exec(line);
  if (!field) return undefined;
  let from = field[0].length;
  let to = line.length;
  while (from < to && (line[from] === ' ' || line[from] === '\t')) from++;
  while (to > from && (line[to - 1] === ' ' || line[to - 1] === '\t')) to--;
  return line.slice(from, to);
}

/** Lines that may name a host, at the start of any line of a text that holds many. */
const NAMING_LINE = new RegExp(NAMING_START.source, 'gim');
/** The next line end, and the next byte that is none. */
const LINE_END = /[\r\n]/g;
const NOT_LINE_END = /[^\r\n]/g;
/**
 * Lines naming a host taken from one read of the tunnel: HTTP sends one per request head, so
 * even a long pipelined burst holds far fewer; a read with more is refused rather than each of
 * them parsed on the server's main thread.
 */
export const MAX_NAMING_LINES = 256;

/** What may pass on now, or the host a line names that the blocked domains refuse. */
export type LineVerdict = { pass: Buffer } | { blocked: string };

/** The host a whole line names (`Host:` header or absolute-form request line), if any. */
export function namedHost(line: string): string | undefined {
  const value = hostValue(line) ?? NAMING_REQUEST.exec(line)?.[1];
  if (value === undefined) return undefined;
  // the line's bytes as UTF-8 (a host may be an IDN, or spell a dot as `。`), `%XX` decoded (a
  // URL parser decodes a host's escapes: `blocked%2etest`)
  const text = percentDecoded(Buffer.from(value, 'latin1').toString('utf8'));
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

/**
 * The line ends (LF or CR) of one chunk, in order: each search starts where the last one found
 * its byte, so a chunk is scanned once for each, however many lines it holds (searching both
 * from every line's start scanned the rest of a chunk of line feeds for a CR once per line).
 */
function lineEnds(chunk: Buffer): (from: number) => number {
  let lf = -2;
  let cr = -2;
  return (from) => {
    if (lf !== -1 && lf < from) lf = chunk.indexOf(0x0a, from);
    if (cr !== -1 && cr < from) cr = chunk.indexOf(0x0d, from);
    return lf < 0 ? cr : cr < 0 ? lf : Math.min(lf, cr);
  };
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
    const lineEnd = lineEnds(chunk);
    let start = 0;
    let whole = true; // the lines up to the chunk's last line end are still to be taken whole
    for (;;) {
      if (whole && this.#line === '' && !this.#skip && start < chunk.length) {
        // a line starts here: the complete lines from here on are taken at once
        whole = false;
        const last = Math.max(chunk.lastIndexOf(0x0a), chunk.lastIndexOf(0x0d));
        if (last >= start) {
          const hit = this.#lines(chunk.toString('latin1', start, last + 1));
          if (hit !== undefined) return { blocked: hit };
          start = last + 1;
          continue;
        }
      }
      const end = lineEnd(start);
      this.#read(chunk.subarray(start, end < 0 ? chunk.length : end));
      if (this.#long && this.#mayName()) {
        return { blocked: `a line of more than ${MAX_LINE} bytes naming a host` };
      }
      if (end < 0) return { pass: chunk };
      const hit = this.#check();
      if (hit !== undefined) return { blocked: hit };
      start = end + 1;
    }
  }

  /**
   * Whether the line read so far may name a host: it starts as one that does, or it continues a
   * `Host` line (obs-fold: a lenient server may take any word of it for the host, past the part
   * read here too).
   */
  #mayName(): boolean {
    const line = this.#line;
    return NAMING_START.test(line) || (this.#afterHost && (line[0] === ' ' || line[0] === '\t'));
  }

  /**
   * Complete lines (`text` ends with a line end, and starts a line): only those that can name a
   * host are looked at one by one, found by one pattern over the whole text (the others cost a
   * native scan, not a step each), and at most `MAX_NAMING_LINES` of them: past that the text is
   * no HTTP a server would take, and the tunnel is refused.
   */
  #lines(text: string): string | undefined {
    let pos = 0;
    let naming = 0;
    const take = (from: number): string | undefined => {
      LINE_END.lastIndex = from;
      LINE_END.test(text);
      const to = LINE_END.lastIndex - 1; // the text ends with a line end: always found
      const line = text.slice(from, to);
      pos = to + 1;
      if (++naming > MAX_NAMING_LINES) {
        return `more than ${MAX_NAMING_LINES} lines naming a host in one read`;
      }
      this.#line = line.slice(0, MAX_LINE);
      this.#long = line.length > MAX_LINE;
      if (this.#long && this.#mayName())
        return `a line of more than ${MAX_LINE} bytes naming a host`;
      return this.#check();
    };
    for (;;) {
      if (this.#afterHost) {
        // the next line that is not empty may continue the `Host` line (obs-fold)
        NOT_LINE_END.lastIndex = pos;
        if (!NOT_LINE_END.test(text)) return undefined;
        const first = NOT_LINE_END.lastIndex - 1;
        if (text[first] === ' ' || text[first] === '\t') {
          const hit = take(first);
          if (hit !== undefined) return hit;
          continue;
        }
      }
      NAMING_LINE.lastIndex = pos;
      const found = NAMING_LINE.exec(text);
      // a line in between that is not empty, and cannot name a host, ends any `Host` line's
      // continuation
      NOT_LINE_END.lastIndex = pos;
      const between =
        NOT_LINE_END.test(text) && NOT_LINE_END.lastIndex - 1 < (found?.index ?? text.length);
      if (between) this.#afterHost = false;
      if (!found) return undefined;
      const c = text.charCodeAt(found.index);
      if (!((c >= 0x41 && c <= 0x5a) || c === 0x68 || c === 0x75 || c === 0x78 || c === 0x66)) {
        // as #read: a line whose first byte no method or `Host` starts with is not read
        this.#afterHost = false;
        LINE_END.lastIndex = found.index;
        LINE_END.test(text);
        pos = LINE_END.lastIndex;
        continue;
      }
      const hit = take(found.index);
      if (hit !== undefined) return hit;
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
      // only lines that can name a host are read: `H`/`h`, `u` (`upgrade`), `x` and `f` (the
      // forwarding headers), a method's first letter (any capital), or after a `Host` line one
      // that continues it (obs-fold: it starts with a space or a tab)
      const folded = (first === 0x20 || first === 0x09) && this.#afterHost;
      this.#skip = !(
        folded ||
        (first >= 0x41 && first <= 0x5a) ||
        first === 0x68 ||
        first === 0x75 ||
        first === 0x78 ||
        first === 0x66
      );
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
    this.#afterHost = HOST_FIELD.test(line);
    if (CLEARTEXT_H2.test(line)) return 'HTTP/2 in the clear (its requests name hosts on no line)';
    const forwarding = FORWARDING_FIELD.exec(line);
    if (forwarding) {
      for (const value of forwardedHosts(forwarding[1]!, line.slice(forwarding[0].length))) {
        const name = namedHost(`Host: ${value}`);
        if (name !== undefined && this.#blocked(name) !== undefined) return name;
      }
      return undefined;
    }
    const name = line === '' ? undefined : namedHost(line);
    return name !== undefined && this.#blocked(name) !== undefined ? name : undefined;
  }
}
