/**
 * What goes into Chromium's DevTools pipe, and how fast: every message the multiplexer (mux.ts)
 * writes passes here, so that what clients send faster than Chromium takes it in waits in a
 * bounded queue in the server, and past that bound in the clients' own sockets.
 *
 * - Chromium's pipe reader hands each message, copied, to the browser's main thread and reads on
 *   without waiting (content/browser/devtools/devtools_pipe_handler.cc): whatever is written ahead
 *   of that thread piles up in Chromium's memory, until the instance's memory limit stalls or
 *   kills it (one client's 3,000 commands of 1000 KiB crashed it; 30 of 90 MiB left it deaf).
 *   So a message is written only once the previous ones have left the socket's buffer, and at
 *   most `CDP_PIPE_WINDOW_BYTES` are written before Chromium has shown it took them in: a cheap
 *   command of the server's own (`barrier`), answered on that thread after every message before
 *   it. A larger message goes alone.
 * - A barrier Chromium leaves unanswered for `CDP_PIPE_DEAF_MS` while the instance is not paused
 *   fails the pipe: the session ends as for a crash (session.ts), the instance says `crashed`.
 * - Bytes waiting here are counted per client, per browser and across the server (a module-wide
 *   total). A client with more than the window waiting is not read (its socket is paused) until
 *   half of it has been written: a client sending faster than Chromium takes in is slowed to
 *   Chromium's pace, and what it sends meanwhile waits in its own socket and the kernel's buffers,
 *   not in the server. Past either total every client of the browser (of the server) is not read
 *   until half of it has been written. A client past `CDP_MAX_INBOUND_BYTES_PER_CLIENT` anyway
 *   (frames already received when it was paused) is closed (`overflow`).
 */
import {
  CDP_MAX_INBOUND_BYTES_PER_BROWSER,
  CDP_MAX_INBOUND_BYTES_PER_CLIENT,
  CDP_MAX_INBOUND_BYTES_TOTAL,
  CDP_PIPE_DEAF_MS,
  CDP_PIPE_WINDOW_BYTES,
} from '../../api/cdp-limits.js';
import type { Closing } from './mux-client.js';
import type { CdpPipe } from './pipe.js';

/** Why every client is closed when the pipe was failed (a deaf browser, a broken bound). */
export const PIPE_FAILED: Closing = {
  code: 1011,
  reason: 'the browser stopped taking in DevTools messages or broke a bound; it was stopped',
};
/** Why a client whose commands wait for Chromium past their bound is closed (1008). */
export const INBOUND_CLOSE: Closing = {
  code: 1008,
  reason: `CDP client sends faster than the browser reads: over ${CDP_MAX_INBOUND_BYTES_PER_CLIENT / 2 ** 20} MiB waiting`,
};

type Message = string | readonly Buffer[];

/** What a gate asks of its multiplexer. */
export interface InboundHooks {
  /** Write (straight into the pipe) a command Chromium answers after every message before it. */
  barrier(answered: () => void): void;
  /** `owner`'s waiting bytes passed its bound: close it (its messages are already let go). */
  overflow(owner: Readers): void;
  /** The clients, to stop and start reading their sockets. */
  readers(): Iterable<Readers>;
}

/** A client as the gate sees it: its socket, to stop and start reading it. */
export interface Readers {
  peer?: { pause?(): void; resume?(): void } | undefined;
}

interface Waiting {
  message: Message;
  bytes: number;
  owner: Readers | undefined;
}

/** Every gate of the server, and the bytes waiting in all of them. */
const gates = new Set<InboundGate>();
let serverWaiting = 0;

export class InboundGate {
  readonly #pipe: CdpPipe;
  readonly #hooks: InboundHooks;
  readonly #queue: Waiting[] = [];
  /** Bytes each client has waiting. */
  readonly #owners = new Map<Readers, number>();
  /** Clients not read for what they have waiting. */
  readonly #slowed = new Set<Readers>();
  #waiting = 0;
  /** Bytes written that Chromium has not yet shown it took in. */
  #unconfirmed = 0;
  #barrier = false;
  #deaf: NodeJS.Timeout | undefined;
  #drain = false;
  #frozen = false;
  #paused = false;

  constructor(pipe: CdpPipe, hooks: InboundHooks) {
    this.#pipe = pipe;
    this.#hooks = hooks;
    gates.add(this);
  }

  /** Whether the clients' sockets are not being read (a new client's starts so too). */
  get paused(): boolean {
    return this.#paused;
  }

  /**
   * Write `message` into the pipe now, or once Chromium has taken in what came before. Throws
   * `CdpMessageTooLarge`, keeping nothing, for one Chromium would not read.
   */
  send(message: Message, owner?: Readers): void {
    const bytes = this.#pipe.measure(message);
    if (!this.#pipe.isOpen) return;
    if (owner && (this.#owners.get(owner) ?? 0) + bytes > CDP_MAX_INBOUND_BYTES_PER_CLIENT) {
      this.forget(owner);
      return this.#hooks.overflow(owner);
    }
    this.#queue.push({ message, bytes, owner });
    this.#count(owner, bytes);
    this.#pump();
  }

  /** Let go of what `owner` has waiting (it went away). */
  forget(owner: Readers): void {
    if (!this.#owners.has(owner)) return;
    for (let i = this.#queue.length - 1; i >= 0; i--) {
      const w = this.#queue[i]!;
      if (w.owner !== owner) continue;
      this.#queue.splice(i, 1);
      this.#count(owner, -w.bytes);
    }
    this.#owners.delete(owner);
    this.#slowed.delete(owner);
    reflowAll();
  }

  /** The instance is paused (Chromium cannot answer) or resumed: the deaf clock stops meanwhile. */
  freeze(frozen: boolean): void {
    this.#frozen = frozen;
    clearTimeout(this.#deaf);
    if (!frozen && this.#barrier) this.#startDeafClock();
  }

  /** The pipe is gone: nothing more is written, every socket is read again. */
  close(): void {
    clearTimeout(this.#deaf);
    for (const w of this.#queue) this.#count(w.owner, -w.bytes);
    this.#queue.length = 0;
    this.#owners.clear();
    this.#slowed.clear();
    gates.delete(this);
    this.#setPaused(false);
    reflowAll();
  }

  #pump(): void {
    while (this.#queue.length > 0 && this.#pipe.isOpen) {
      if (this.#pipe.unwritten > 0) return this.#awaitDrain();
      const head = this.#queue[0]!;
      if (this.#unconfirmed > 0 && this.#unconfirmed + head.bytes > CDP_PIPE_WINDOW_BYTES) {
        return this.#confirm();
      }
      this.#queue.shift();
      this.#count(head.owner, -head.bytes);
      this.#pipe.send(head.message);
      this.#unconfirmed += head.bytes;
    }
    if (this.#unconfirmed >= CDP_PIPE_WINDOW_BYTES / 2) this.#confirm();
  }

  #awaitDrain(): void {
    // a Chromium that stops reading leaves the socket full: the barrier behind it starts the clock
    if (this.#unconfirmed > 0) this.#confirm();
    if (this.#drain) return;
    this.#drain = true;
    this.#pipe.drained(() => {
      this.#drain = false;
      this.#pump();
    });
  }

  /** Ask Chromium to show it took in what was written so far; write on when it has. */
  #confirm(): void {
    if (this.#barrier || !this.#pipe.isOpen) return;
    this.#barrier = true;
    const bytes = this.#unconfirmed;
    this.#startDeafClock();
    this.#hooks.barrier(() => {
      this.#barrier = false;
      clearTimeout(this.#deaf);
      this.#unconfirmed -= bytes;
      this.#pump();
    });
  }

  #startDeafClock(): void {
    clearTimeout(this.#deaf);
    if (this.#frozen) return;
    this.#deaf = setTimeout(() => {
      if (this.#barrier && !this.#frozen) {
        this.#pipe.fail(`Chromium took in no DevTools message for ${CDP_PIPE_DEAF_MS / 1000} s`);
      }
    }, CDP_PIPE_DEAF_MS);
    this.#deaf.unref();
  }

  #count(owner: Readers | undefined, bytes: number): void {
    this.#waiting += bytes;
    serverWaiting += bytes;
    if (owner) {
      const waiting = (this.#owners.get(owner) ?? 0) + bytes;
      this.#owners.set(owner, waiting);
      if (waiting > CDP_PIPE_WINDOW_BYTES && !this.#slowed.has(owner)) {
        this.#slowed.add(owner);
        owner.peer?.pause?.();
      } else if (waiting <= CDP_PIPE_WINDOW_BYTES / 2 && this.#slowed.delete(owner)) {
        if (!this.#paused) owner.peer?.resume?.();
      }
    }
    reflowAll();
  }

  /** Stop reading past either total; read again once both are under half of theirs. */
  reflow(): void {
    if (this.#paused) {
      const under =
        this.#waiting <= CDP_MAX_INBOUND_BYTES_PER_BROWSER / 2 &&
        serverWaiting <= CDP_MAX_INBOUND_BYTES_TOTAL / 2;
      if (under) this.#setPaused(false);
    } else if (
      this.#waiting > CDP_MAX_INBOUND_BYTES_PER_BROWSER ||
      serverWaiting > CDP_MAX_INBOUND_BYTES_TOTAL
    ) {
      this.#setPaused(true);
    }
  }

  #setPaused(paused: boolean): void {
    if (this.#paused === paused) return;
    this.#paused = paused;
    for (const reader of this.#hooks.readers()) {
      if (paused) reader.peer?.pause?.();
      else if (!this.#slowed.has(reader)) reader.peer?.resume?.();
    }
  }
}

function reflowAll(): void {
  for (const gate of gates) gate.reflow();
}
