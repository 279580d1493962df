/**
 * Chromium's DevTools pipe (`--remote-debugging-pipe`): commands are written to the browser's
 * fd 3, replies and events are read from its fd 4, each message one JSON text followed by a NUL
 * byte. No socket is listening anywhere, so only the process holding these descriptors (this
 * server) can reach DevTools.
 *
 * Messages come out as the raw bytes Chromium wrote, so that a relay can pass them on without
 * decoding; writes are UTF-8 text.
 */
import type { Readable, Writable } from 'node:stream';

export interface CdpPipeReader {
  /** One message, without its NUL terminator. */
  message(data: Buffer): void;
  /** The pipe is gone (Chromium exited, or `close()`); called once. */
  close(): void;
}

export class CdpPipe {
  readonly #out: Writable;
  readonly #in: Readable;
  /** Pieces of the message being read, before its NUL arrives. */
  #partial: Buffer[] = [];
  /** Messages read while there was no reader. */
  #held: Buffer[] = [];
  #reader: CdpPipeReader | undefined;
  #open = true;

  /** `out`: our end of Chromium's fd 3; `input`: our end of its fd 4. */
  constructor(out: Writable, input: Readable) {
    this.#out = out;
    this.#in = input;
    input.on('data', (chunk: Buffer) => this.#read(chunk));
    for (const stream of [out, input]) {
      stream.on('error', () => this.close()); // EPIPE once Chromium is gone
      stream.once('close', () => this.close());
    }
  }

  get isOpen(): boolean {
    return this.#open;
  }

  /**
   * Deliver every message (those held so far first) and the end of the pipe to `reader`, in
   * place of the previous one; `undefined` holds messages until the next reader.
   */
  listen(reader: CdpPipeReader | undefined): void {
    this.#reader = reader;
    if (!reader) return;
    const held = this.#held;
    this.#held = [];
    for (const data of held) reader.message(data);
    if (!this.#open) reader.close();
  }

  /** Write one message; dropped when the pipe is closed. */
  send(text: string): void {
    if (!this.#open) return;
    this.#out.write(`${text}\0`); // one write: no wakeup of Chromium's reader for a lone NUL
  }

  /** Close both ends; idempotent. The reader's `close` follows. */
  close(): void {
    if (!this.#open) return;
    this.#open = false;
    this.#out.destroy();
    this.#in.destroy();
    this.#reader?.close();
  }

  #read(chunk: Buffer): void {
    let start = 0;
    for (let end = chunk.indexOf(0); end !== -1; end = chunk.indexOf(0, start)) {
      const piece = chunk.subarray(start, end);
      let message = piece;
      if (this.#partial.length > 0) {
        this.#partial.push(piece);
        message = Buffer.concat(this.#partial);
        this.#partial = [];
      }
      start = end + 1;
      if (this.#reader) this.#reader.message(message);
      else this.#held.push(message);
      if (!this.#open) return;
    }
    if (start < chunk.length) this.#partial.push(chunk.subarray(start));
  }
}
