/**
 * Chromium's DevTools pipe (`--remote-debugging-pipe`): commands are written to the browser's
 * fd 3, replies and events are read from its fd 4, each message one JSON text followed by a NUL
 * byte. No socket is listening anywhere, so only the process holding these descriptors (this
 * server) can reach DevTools.
 *
 * Messages come out as the raw bytes Chromium wrote, so that a relay can pass them on without
 * decoding; writes are UTF-8 text, or the bytes of a client's command as they came.
 */
import type { Readable, Writable } from 'node:stream';
import { CDP_MAX_COMMAND_WIRE_BYTES, CDP_MAX_MESSAGE_BYTES } from '../../api/cdp-limits.js';
import { bytesPerTurn } from '../../internal/cpu-share.js';

const NUL = Buffer.from([0]);
const EMPTY = Buffer.alloc(0);

/** A message too long for Chromium's pipe reader: refused, nothing written. */
export class CdpMessageTooLarge extends Error {
  override name = 'CdpMessageTooLarge';
}

export interface CdpPipeReader {
  /** One message, without its NUL terminator. */
  message(data: Buffer): void;
  /** The pipe is gone (Chromium exited, or `close()`); called once. */
  close(): void;
}

export class CdpPipe {
  readonly #out: Writable;
  readonly #in: Readable;
  readonly #maxMessage: number;
  /**
   * The message being read, before its NUL arrives: its first `#partialBytes` bytes, copied out
   * of the chunks as they come (see `#append`).
   */
  #partial: Buffer | undefined;
  #partialBytes = 0;
  /** Messages read while there was no reader, and their length. */
  #held: Buffer[] = [];
  #heldBytes = 0;
  #reader: CdpPipeReader | undefined;
  #open = true;
  /** Why the pipe was failed (`fail`), if it was. */
  #failure: string | undefined;

  /**
   * `out`: our end of Chromium's fd 3; `input`: our end of its fd 4. `maxMessage`: longest
   * message read (default `CDP_MAX_MESSAGE_BYTES`).
   */
  constructor(out: Writable, input: Readable, maxMessage = CDP_MAX_MESSAGE_BYTES) {
    this.#out = out;
    this.#in = input;
    this.#maxMessage = maxMessage;
    input.on('data', (chunk: Buffer) => {
      this.#read(chunk);
      // past the main thread's bytes for this turn, read on in the next (internal/cpu-share.ts)
      bytesPerTurn.pace(input, chunk.length, () => this.#open);
    });
    for (const stream of [out, input]) {
      stream.on('error', () => this.close()); // EPIPE once Chromium is gone
      stream.once('close', () => this.close());
    }
  }

  get isOpen(): boolean {
    return this.#open;
  }

  /** Why the pipe was failed: the peer broke the protocol or a bound. */
  get failure(): string | undefined {
    return this.#failure;
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
    this.#heldBytes = 0;
    for (const data of held) reader.message(data);
    if (!this.#open) reader.close();
  }

  /**
   * Write one message (a text, or its UTF-8 bytes in pieces written as they are); dropped when
   * the pipe is closed. Throws `CdpMessageTooLarge` for one Chromium would not read.
   */
  send(message: string | readonly Buffer[]): void {
    if (!this.#open) return;
    this.measure(message);
    if (typeof message === 'string') {
      this.#out.write(`${message}\0`); // one write: no wakeup of Chromium's reader for a lone NUL
      return;
    }
    // pieces of a relayed command (tens of MiB) are not joined: corked, they go out in one writev
    this.#out.cork();
    for (const piece of message) this.#out.write(piece);
    this.#out.write(NUL);
    this.#out.uncork();
  }

  /** Bytes `message` takes on the wire; throws `CdpMessageTooLarge` for one Chromium would not read. */
  measure(message: string | readonly Buffer[]): number {
    const bytes =
      (typeof message === 'string'
        ? Buffer.byteLength(message)
        : message.reduce((n, piece) => n + piece.length, 0)) + 1;
    if (bytes > CDP_MAX_COMMAND_WIRE_BYTES) {
      throw new CdpMessageTooLarge(
        `a DevTools message of ${bytes} bytes (Chromium reads at most ${CDP_MAX_COMMAND_WIRE_BYTES})`,
      );
    }
    return bytes;
  }

  /** Bytes written that the socket has not yet handed to Chromium's end. */
  get unwritten(): number {
    return this.#open ? this.#out.writableLength : 0;
  }

  /** Call `then` once everything written has left for Chromium's end (or the pipe closed). */
  drained(then: () => void): void {
    if (this.unwritten === 0) return void queueMicrotask(then);
    // an empty write's callback runs once every write before it has been handed on ('drain'
    // comes only after a write that passed the stream's high-water mark)
    this.#out.write(EMPTY, () => then());
  }

  /** The peer broke the protocol or a bound: close, keeping `reason` for whoever asks. */
  fail(reason: string): void {
    if (!this.#open) return;
    this.#failure = reason;
    this.close();
  }

  /** Close both ends; idempotent. The reader's `close` follows. */
  close(): void {
    if (!this.#open) return;
    this.#open = false;
    this.#out.destroy();
    this.#in.destroy();
    this.#partial = undefined;
    this.#partialBytes = 0;
    this.#held = [];
    this.#reader?.close();
  }

  #read(chunk: Buffer): void {
    if (!this.#open) return;
    let start = 0;
    for (let end = chunk.indexOf(0); end !== -1; end = chunk.indexOf(0, start)) {
      const piece = chunk.subarray(start, end);
      start = end + 1;
      if (this.#partialBytes + piece.length > this.#maxMessage) return this.#tooLong();
      let message = piece;
      if (this.#partialBytes > 0) {
        message = this.#append(piece);
        this.#partial = undefined;
        this.#partialBytes = 0;
      }
      if (this.#reader) {
        this.#reader.message(message);
      } else {
        // nobody reads yet (Chromium sends nothing unasked): at most one message's worth
        this.#heldBytes += message.length;
        if (this.#heldBytes > this.#maxMessage) return this.fail('unread DevTools messages');
        this.#held.push(message);
      }
      if (!this.#open) return;
    }
    if (start < chunk.length) {
      const rest = chunk.subarray(start);
      if (this.#partialBytes + rest.length > this.#maxMessage) return this.#tooLong();
      this.#append(rest);
    }
  }

  /**
   * Copy `piece` to the end of the message being read; the message so far. The chunks the pipe
   * delivers (64 KiB each) are let go at once instead of being kept until the NUL and joined: a
   * long message kept as thousands of small allocations left the server's memory fragmented
   * (~170 MiB resident after one 200 MiB reply, never given back), where one buffer that grows by
   * doubling is a single large allocation the allocator returns to the system when it is freed.
   */
  #append(piece: Buffer): Buffer {
    const length = this.#partialBytes + piece.length;
    let into = this.#partial;
    if (!into || length > into.length) {
      const size = Math.min(this.#maxMessage, Math.max(length, 2 * (into?.length ?? 0), 1 << 20));
      const grown = Buffer.allocUnsafeSlow(size);
      into?.copy(grown, 0, 0, this.#partialBytes);
      this.#partial = into = grown;
    }
    piece.copy(into, this.#partialBytes);
    this.#partialBytes = length;
    return into.subarray(0, length);
  }

  #tooLong(): void {
    this.fail(`a DevTools message longer than ${this.#maxMessage} bytes`);
  }
}
