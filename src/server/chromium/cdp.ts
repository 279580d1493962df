/**
 * A small Chrome DevTools Protocol client: commands with bounded timeouts, events, and flattened
 * sessions (`Target.attachToTarget {flatten: true}` → pass the `sessionId` to `send`), over a
 * transport (transport.ts): the browser's pipe for the server, a WebSocket for tests.
 */
import { withDeadline } from '../../internal/deadline.js';
import { JsonTooCostly, parseBounded } from '../../internal/json-bounded.js';
import { connectWebSocket, type CdpParams, type CdpTransport } from './transport.js';

export type { CdpParams } from './transport.js';

const DEFAULT_TIMEOUT_MS = 15_000;

export type CdpListener = (params: CdpParams, sessionId: string | undefined) => void;

export class CdpError extends Error {
  constructor(
    readonly method: string,
    message: string,
  ) {
    super(`${method}: ${message}`);
    this.name = 'CdpError';
  }
}

interface Pending {
  method: string;
  resolve: (result: unknown) => void;
  reject: (err: Error) => void;
}

interface Message {
  id?: number;
  method?: string;
  params?: CdpParams;
  sessionId?: string;
  result?: unknown;
  error?: { message: string };
}

/** A reply's id or an event's method, read before anything is decoded. */
const HEAD = /^\{"(?:id":(\d+),|method":"([^"\\]+)")/;
/** Replies may be larger than events: cookies, storage and IndexedDB of a whole profile. */
const MAX_REPLY_CONTAINERS = 1_000_000;

export class CdpConnection {
  readonly #transport: CdpTransport;
  readonly #pending = new Map<number, Pending>();
  readonly #listeners = new Map<string, Set<CdpListener>>();
  #nextId = 1;
  #closeReason: string | undefined;
  /** Resolves when the transport has closed, for whatever reason. */
  readonly closed: Promise<void>;

  constructor(transport: CdpTransport) {
    this.#transport = transport;
    this.closed = new Promise((resolve) => {
      transport.listen({
        message: (text) => this.#onMessage(text),
        close: () => {
          this.#closeReason ??= 'CDP connection closed';
          for (const p of this.#pending.values())
            p.reject(new CdpError(p.method, this.#closeReason));
          this.#pending.clear();
          resolve();
        },
      });
    });
  }

  /** Open a connection to a DevTools WebSocket endpoint, e.g. a `cdp_url`. */
  static async connect(url: string, timeoutMs = DEFAULT_TIMEOUT_MS): Promise<CdpConnection> {
    return new CdpConnection(await connectWebSocket(url, timeoutMs));
  }

  get isOpen(): boolean {
    return this.#transport.isOpen;
  }

  send<T = CdpParams>(
    method: string,
    params: CdpParams = {},
    sessionId?: string,
    timeoutMs = DEFAULT_TIMEOUT_MS,
  ): Promise<T> {
    if (!this.isOpen) {
      return Promise.reject(new CdpError(method, this.#closeReason ?? 'CDP connection not open'));
    }
    const id = this.#nextId++;
    const reply = new Promise<T>((resolve, reject) => {
      this.#pending.set(id, { method, resolve: resolve as (r: unknown) => void, reject });
      try {
        this.#transport.send(
          sessionId ? { id, method, params, sessionId } : { id, method, params },
        );
      } catch (err) {
        this.#pending.delete(id); // never sent: no reply to wait for
        throw err;
      }
    });
    return withDeadline(reply, timeoutMs, () => {
      this.#pending.delete(id); // a late reply is not decoded
      return new CdpError(method, `no answer within ${timeoutMs} ms`);
    });
  }

  /** Subscribe to an event; returns the unsubscribe function. */
  on(method: string, listener: CdpListener): () => void {
    let set = this.#listeners.get(method);
    if (!set) this.#listeners.set(method, (set = new Set()));
    set.add(listener);
    return () => set.delete(listener);
  }

  /** The next `method` event (of `sessionId`, if given) for which `match` holds. */
  waitFor(
    method: string,
    sessionId: string | undefined,
    match: (params: CdpParams) => boolean = () => true,
    timeoutMs = DEFAULT_TIMEOUT_MS,
  ): Promise<CdpParams> {
    let off = () => {};
    const event = new Promise<CdpParams>((resolve) => {
      off = this.on(method, (params, sid) => {
        if ((sessionId === undefined || sid === sessionId) && match(params)) resolve(params);
      });
    });
    const timedOut = () => new CdpError(method, `no event within ${timeoutMs} ms`);
    return withDeadline(event, timeoutMs, timedOut).finally(() => off());
  }

  close(reason = 'CDP connection closed'): void {
    this.#closeReason ??= reason;
    this.#transport.close();
  }

  /**
   * Messages come from Chromium, which the instance can take over: what nobody waits for is not
   * decoded at all, and what is decoded has a bounded number of objects and arrays
   * (json-bounded.ts), so no message makes the server build millions of them.
   */
  #onMessage(text: string): void {
    const head = HEAD.exec(text.slice(0, 128));
    if (head?.[1] !== undefined && !this.#pending.has(Number(head[1]))) return;
    if (head?.[2] !== undefined && !this.#listeners.get(head[2])?.size) return;
    let msg: Message;
    try {
      msg = parseBounded(
        text,
        head?.[1] !== undefined ? MAX_REPLY_CONTAINERS : undefined,
      ) as Message;
    } catch (err) {
      if (!(err instanceof JsonTooCostly)) throw err; // not JSON: the transport fails
      const p = head?.[1] !== undefined ? this.#pending.get(Number(head[1])) : undefined;
      if (p) {
        this.#pending.delete(Number(head![1]));
        p.reject(new CdpError(p.method, `reply not decoded: ${err.message}`));
      }
      return;
    }
    if (msg.id !== undefined) {
      const p = this.#pending.get(msg.id);
      if (!p) return;
      this.#pending.delete(msg.id);
      if (msg.error) p.reject(new CdpError(p.method, msg.error.message));
      else p.resolve(msg.result ?? {});
    } else if (msg.method) {
      for (const listener of this.#listeners.get(msg.method) ?? []) {
        listener(msg.params ?? {}, msg.sessionId);
      }
    }
  }
}
