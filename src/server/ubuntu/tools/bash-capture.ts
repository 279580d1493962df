/**
 * What one bash session (bash.ts) keeps of its pipes: the first and last bytes of a call's output
 * (`Capture`), and the scan for the sync token that marks where a call's output ends
 * (`SyncScanner`): bytes before it are the call's, bytes after it are not.
 */

/** Bytes of stdout, and of stderr, one call returns at most. */
export const OUTPUT_CAP = 100_000;

/** Keeps the first and the last OUTPUT_CAP/2 bytes of a stream and counts what it dropped. */
export class Capture {
  #head: Buffer[] = [];
  #headLen = 0;
  #tail: Buffer[] = [];
  #tailLen = 0;
  #dropped = 0;

  constructor(readonly cap = OUTPUT_CAP) {}

  push(chunk: Buffer): void {
    const half = this.cap / 2;
    if (this.#headLen < half) {
      const n = Math.min(half - this.#headLen, chunk.length);
      this.#head.push(chunk.subarray(0, n));
      this.#headLen += n;
      chunk = chunk.subarray(n);
    }
    if (chunk.length === 0) return;
    this.#tail.push(chunk);
    this.#tailLen += chunk.length;
    while (this.#tailLen > half) {
      const first = this.#tail[0]!;
      const excess = this.#tailLen - half;
      const cut = Math.min(excess, first.length);
      if (cut === first.length) this.#tail.shift();
      else this.#tail[0] = first.subarray(cut);
      this.#tailLen -= cut;
      this.#dropped += cut;
    }
  }

  /** Everything captured so far as text (invalid UTF-8 becomes U+FFFD); resets the capture. */
  take(): { text: string; dropped: number } {
    const head = Buffer.concat(this.#head).toString('utf8');
    const tail = Buffer.concat(this.#tail).toString('utf8');
    const dropped = this.#dropped;
    this.#head = [];
    this.#tail = [];
    this.#headLen = this.#tailLen = this.#dropped = 0;
    const text = dropped > 0 ? `${head}\n[... ${dropped} bytes omitted ...]\n${tail}` : head + tail;
    return { text, dropped };
  }
}

/**
 * Scans one pipe for the sync token once it has been sent: what comes before it is the call's
 * (`sink`, or nobody's once `draining`), what comes after goes to `after` (the boundary).
 */
export class SyncScanner {
  #pending = Buffer.alloc(0);
  found = false;
  /** The call already answered (its sync grace passed): its late bytes are dropped. */
  draining = false;
  constructor(
    readonly token: Buffer,
    readonly sink: Capture,
    readonly onFound: () => void,
    readonly after: (bytes: Buffer) => void,
  ) {}

  push(chunk: Buffer): void {
    if (this.found) return this.after(chunk);
    const buf = Buffer.concat([this.#pending, chunk]);
    const at = buf.indexOf(this.token);
    if (at >= 0) {
      this.#before(buf.subarray(0, at));
      this.#pending = Buffer.alloc(0);
      this.found = true;
      this.onFound();
      return this.after(buf.subarray(at + this.token.length));
    }
    const keep = Math.min(buf.length, this.token.length - 1);
    this.#before(buf.subarray(0, buf.length - keep));
    this.#pending = Buffer.from(buf.subarray(buf.length - keep));
  }

  flush(): void {
    this.#before(this.#pending);
    this.#pending = Buffer.alloc(0);
  }

  #before(bytes: Buffer): void {
    if (!this.draining) this.sink.push(bytes);
  }
}
