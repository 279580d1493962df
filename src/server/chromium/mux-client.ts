/**
 * One relay client as the multiplexer (mux.ts) keeps it: the session the server attached for it
 * and the sessions it owns, what waits for it before its socket is connected, and what it sent on
 * a session while a navigation of its there was being checked. Both waits are bounded together
 * by `CDP_MAX_QUEUED_BYTES`: past it the mux drops the client.
 */
import { CDP_MAX_QUEUED_BYTES } from '../../api/cdp-limits.js';

/** A close code and its reason, for the client's WebSocket. */
export type Closing = { code: number; reason: string };

/** Where a client's messages go: its WebSocket, in the relay. */
export interface MuxPeer {
  /** One message, a JSON text. */
  send(data: Buffer): void;
  /** Chromium ended the client's session, or the browser is gone; or the client broke a bound. */
  close(why?: Closing): void;
  /** Stop reading the client's messages, and read them again (inbound.ts). */
  pause?(): void;
  resume?(): void;
}

export class ClientState {
  /** The session the server attached for it; its commands without `sessionId` go there. */
  readonly session: string;
  /** Its target when it is a page connection. */
  readonly targetId: string | undefined;
  /** Sessions it owns besides its own, with their targets when known. */
  readonly owned = new Map<string, string | undefined>();
  peer: MuxPeer | undefined;
  /** Its commands Chromium has not answered yet. */
  inFlight = 0;
  closed = false;
  /** Messages that arrived before `connect`, and their length. */
  #queue: Buffer[] = [];
  #queued = 0;
  /**
   * Sessions with a navigation being checked → the client's later messages on them, held so
   * that they keep their order (its other sessions go on); `#heldBytes` counts them all.
   */
  readonly #held = new Map<string, Buffer[]>();
  #heldBytes = 0;
  /** The size of the first message held since nothing was: not counted against the bound. */
  #firstHeld = 0;

  constructor(session: string, targetId: string | undefined) {
    this.session = session;
    this.targetId = targetId;
  }

  /** The target of one of its sessions, when known. */
  targetOf(sessionId: string): string | undefined {
    return sessionId === this.session ? this.targetId : this.owned.get(sessionId);
  }

  /**
   * Start delivering to `peer`, what waited first; a closed client closes the peer instead.
   * `paused`: its messages are not read for now (inbound.ts).
   */
  connect(peer: MuxPeer, paused = false): void {
    if (this.closed) return peer.close();
    if (paused) peer.pause?.();
    this.peer = peer;
    const queue = this.#queue;
    this.#queue = [];
    this.#queued = 0;
    for (const data of queue) peer.send(data);
  }

  /** Deliver `data`, or keep it until `connect`; false when that passes the bound. */
  deliver(data: Buffer): boolean {
    if (this.peer) {
      this.peer.send(data);
      return true;
    }
    this.#queued += data.length;
    if (this.#queued > CDP_MAX_QUEUED_BYTES) return false;
    this.#queue.push(data);
    return true;
  }

  /** Whether messages on `session` wait for a navigation being checked there. */
  holding(session: string): boolean {
    return this.#held.has(session);
  }

  /** From now on, messages on `session` wait (`hold`) until `release`. */
  startHolding(session: string): void {
    this.#held.set(session, []);
  }

  /**
   * Keep a message for `session` (which is `holding`); false when that passes the bound. The
   * first message held is not counted, whatever its size: one frame, which the relay has already read
   * (at most `CDP_MAX_COMMAND_BYTES`), such as a second large command sent while the first one's
   * params are being checked (command.ts).
   */
  hold(session: string, data: Buffer): boolean {
    if (this.#heldBytes === 0) this.#firstHeld = data.length;
    this.#held.get(session)?.push(data);
    this.#heldBytes += data.length;
    return this.#heldBytes - this.#firstHeld <= CDP_MAX_QUEUED_BYTES;
  }

  /**
   * Stop holding on `session`; `run` gets each message that waited, in order, until one of them
   * makes the session hold again (another navigation being checked): the rest then waits behind
   * that one.
   */
  release(session: string, run: (data: Buffer) => void): void {
    const waiting = this.#held.get(session) ?? [];
    this.#held.delete(session);
    while (waiting.length > 0 && !this.#held.has(session) && !this.closed) {
      const data = waiting.shift()!;
      this.#heldBytes -= data.length;
      run(data);
    }
    if (waiting.length > 0) this.#held.get(session)?.push(...waiting);
  }

  /** Mark closed and let go of everything waiting. */
  close(): void {
    this.closed = true;
    this.#queue = [];
    this.#queued = 0;
    this.#held.clear();
    this.#heldBytes = 0;
  }
}
