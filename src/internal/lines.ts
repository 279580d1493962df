/**
 * Newline-delimited text from a byte stream another process writes, in lines of bounded length:
 * `node:readline` keeps a line until its newline arrives, however long it grows.
 */

/** A line passed its bound (`LineDecoder` in strict mode). */
export class LineTooLong extends Error {
  override name = 'LineTooLong';
}

export interface LineDecoderOptions {
  /** Longest line in bytes, without its newline. */
  maxBytes: number;
  /**
   * What a longer line does: `throw` (LineTooLong; the stream is not to be trusted further) or
   * `truncate` (its first `maxBytes` bytes count as the line, the rest up to the newline is
   * dropped: for logs). Default `throw`.
   */
  overflow?: 'throw' | 'truncate';
}

/** Splits a byte stream cut anywhere into UTF-8 lines; holds at most `maxBytes` bytes. */
export class LineDecoder {
  readonly #max: number;
  readonly #truncate: boolean;
  #parts: Buffer[] = [];
  #held = 0;
  /** Dropping the rest of a truncated line. */
  #skipping = false;

  constructor(opts: LineDecoderOptions) {
    this.#max = opts.maxBytes;
    this.#truncate = opts.overflow === 'truncate';
  }

  /** Feed bytes; returns the lines they complete (without `\n`; a `\r` before it is kept). */
  push(chunk: Buffer): string[] {
    const lines: string[] = [];
    let start = 0;
    for (let end = chunk.indexOf(10); end !== -1; end = chunk.indexOf(10, start)) {
      const piece = chunk.subarray(start, end);
      start = end + 1;
      if (this.#skipping) {
        this.#skipping = false;
        continue;
      }
      this.#hold(piece);
      this.#skipping = false; // the newline ends a truncated line too
      lines.push(this.#flush());
    }
    if (start < chunk.length && !this.#skipping) {
      this.#hold(chunk.subarray(start));
      if (this.#skipping) lines.push(this.#flush()); // truncated: the rest is dropped
    }
    return lines;
  }

  /** Keep `piece` of the current line, within the bound. */
  #hold(piece: Buffer): void {
    if (this.#held + piece.length <= this.#max) {
      this.#parts.push(piece);
      this.#held += piece.length;
      return;
    }
    if (!this.#truncate) {
      throw new LineTooLong(`a line of more than ${this.#max} bytes`);
    }
    this.#parts.push(piece.subarray(0, this.#max - this.#held));
    this.#held = this.#max;
    this.#skipping = true;
  }

  #flush(): string {
    const line = Buffer.concat(this.#parts, this.#held).toString('utf8');
    this.#parts = [];
    this.#held = 0;
    return line;
  }
}
