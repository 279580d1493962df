/**
 * A small Chrome DevTools Protocol client over `ws`: commands with bounded timeouts, events, and
 * flattened sessions (`Target.attachToTarget {flatten: true}` → pass the `sessionId` to `send`).
 */
import WebSocket from 'ws';

/** Largest CDP message accepted (screenshots of big viewports are tens of MiB of base64). */
export const CDP_MAX_PAYLOAD = 512 * 1024 * 1024;

const DEFAULT_TIMEOUT_MS = 15_000;

export type CdpParams = Record<string, unknown>;
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
  timer: NodeJS.Timeout;
}

interface Message {
  id?: number;
  method?: string;
  params?: CdpParams;
  sessionId?: string;
  result?: unknown;
  error?: { message: string };
}

export class CdpConnection {
  readonly #ws: WebSocket;
  readonly #pending = new Map<number, Pending>();
  readonly #listeners = new Map<string, Set<CdpListener>>();
  #nextId = 1;
  #closeReason: string | undefined;
  /** Resolves when the socket has closed, for whatever reason. */
  readonly closed: Promise<void>;

  private constructor(ws: WebSocket) {
    this.#ws = ws;
    ws.on('message', (data) => this.#onMessage(data.toString()));
    this.closed = new Promise((resolve) => {
      ws.once('close', () => {
        this.#closeReason ??= 'CDP connection closed';
        for (const p of this.#pending.values()) {
          clearTimeout(p.timer);
          p.reject(new CdpError(p.method, this.#closeReason));
        }
        this.#pending.clear();
        resolve();
      });
    });
  }

  /** Open a connection to a DevTools WebSocket endpoint. */
  static connect(url: string, timeoutMs = DEFAULT_TIMEOUT_MS): Promise<CdpConnection> {
    const ws = new WebSocket(url, {
      perMessageDeflate: false,
      maxPayload: CDP_MAX_PAYLOAD,
      handshakeTimeout: timeoutMs,
    });
    return new Promise((resolve, reject) => {
      ws.once('open', () => {
        ws.removeAllListeners('error');
        ws.on('error', () => ws.terminate()); // surfaces as 'close'
        resolve(new CdpConnection(ws));
      });
      ws.once('error', reject);
    });
  }

  get isOpen(): boolean {
    return this.#ws.readyState === WebSocket.OPEN;
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
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#pending.delete(id);
        reject(new CdpError(method, `no answer within ${timeoutMs} ms`));
      }, timeoutMs);
      this.#pending.set(id, { method, resolve: resolve as (r: unknown) => void, reject, timer });
      this.#ws.send(
        JSON.stringify(sessionId ? { id, method, params, sessionId } : { id, method, params }),
      );
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
    return new Promise((resolve, reject) => {
      const done = (err: Error | undefined, params?: CdpParams) => {
        clearTimeout(timer);
        off();
        if (err) reject(err);
        else resolve(params ?? {});
      };
      const timer = setTimeout(
        () => done(new CdpError(method, `no event within ${timeoutMs} ms`)),
        timeoutMs,
      );
      const off = this.on(method, (params, sid) => {
        if ((sessionId === undefined || sid === sessionId) && match(params))
          done(undefined, params);
      });
    });
  }

  close(reason = 'CDP connection closed'): void {
    this.#closeReason ??= reason;
    this.#ws.terminate();
  }

  #onMessage(text: string): void {
    const msg = JSON.parse(text) as Message;
    if (msg.id !== undefined) {
      const p = this.#pending.get(msg.id);
      if (!p) return;
      this.#pending.delete(msg.id);
      clearTimeout(p.timer);
      if (msg.error) p.reject(new CdpError(p.method, msg.error.message));
      else p.resolve(msg.result ?? {});
    } else if (msg.method) {
      for (const listener of this.#listeners.get(msg.method) ?? []) {
        listener(msg.params ?? {}, msg.sessionId);
      }
    }
  }
}
