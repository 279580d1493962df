/**
 * What a `CdpConnection` runs over: the server's own channel on a browser's DevTools pipe
 * (mux.ts), or a DevTools WebSocket such as a `cdp_url` (tests and benchmarks use that one).
 */
import WebSocket from 'ws';
import { CDP_MAX_COMMAND_BYTES, CDP_MAX_MESSAGE_BYTES } from '../../api/index.js';

/**
 * Largest CDP message received from a browser (screenshots of big viewports are tens of MiB of
 * base64): what Chromium's own DevTools server sends at most, and Playwright accepts.
 */
export const CDP_MAX_PAYLOAD = CDP_MAX_MESSAGE_BYTES;

/**
 * Largest command a `cdp_url` client may send (src/api/cdp-limits.ts): under the 100 MiB
 * Chromium's DevTools reader holds (over a socket and over the pipe alike). File contents go
 * through the `upload` operation; big `Runtime.evaluate` and `DOM.setFileInputFiles` commands fit.
 */
export { CDP_MAX_COMMAND_BYTES };

export type CdpParams = Record<string, unknown>;

/** One command as the connection hands it to its transport, which serialises it. */
export interface CdpCommand {
  id: number;
  method: string;
  params: CdpParams;
  sessionId?: string | undefined;
}

export interface CdpTransportReader {
  /** One message (a JSON text): a reply or an event. */
  message(text: string): void;
  /** The transport is gone; called once. */
  close(): void;
}

export interface CdpTransport {
  readonly isOpen: boolean;
  send(command: CdpCommand): void;
  /** Deliver messages and the end of the transport to `reader`; called once. */
  listen(reader: CdpTransportReader): void;
  /** Close (the reader's `close` follows); idempotent. */
  close(): void;
}

/** Open a DevTools WebSocket, e.g. a `cdp_url`. */
export function connectWebSocket(url: string, timeoutMs: number): Promise<CdpTransport> {
  const ws = new WebSocket(url, {
    perMessageDeflate: false,
    maxPayload: CDP_MAX_PAYLOAD,
    handshakeTimeout: timeoutMs,
  });
  return new Promise((resolve, reject) => {
    ws.once('open', () => {
      ws.removeAllListeners('error');
      ws.on('error', () => ws.terminate()); // surfaces as 'close'
      resolve(new WebSocketTransport(ws));
    });
    ws.once('error', reject);
  });
}

class WebSocketTransport implements CdpTransport {
  readonly #ws: WebSocket;

  constructor(ws: WebSocket) {
    this.#ws = ws;
  }

  get isOpen(): boolean {
    return this.#ws.readyState === WebSocket.OPEN;
  }

  send(command: CdpCommand): void {
    this.#ws.send(JSON.stringify(command));
  }

  listen(reader: CdpTransportReader): void {
    this.#ws.on('message', (data) => {
      try {
        reader.message(data.toString());
      } catch {
        this.#ws.terminate(); // not CDP: the connection is not to be trusted further
      }
    });
    this.#ws.once('close', () => reader.close());
  }

  close(): void {
    this.#ws.terminate();
  }
}
