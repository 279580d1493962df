/**
 * The authenticated CDP relay behind `cdp_url`: a client WebSocket (token already checked by the
 * server) becomes one more connection on the browser's DevTools pipe (mux.ts), with a browser
 * session of its own, or a page session for `/devtools/page/<id>`. Nothing of the client's
 * request reaches Chromium (no headers, no socket: DevTools listen nowhere); messages are text
 * frames without compression, up to `CDP_MAX_PAYLOAD`; the browser stopping closes every client.
 */
import { STATUS_CODES, type IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type WebSocket from 'ws';
import { WebSocketServer } from 'ws';
import type { CdpMux, MuxClient, MuxTarget } from './mux.js';
import { CDP_MAX_PAYLOAD } from './transport.js';

const PAGE_PATH = /^devtools\/page\/([A-Za-z0-9-]+)$/;

export class CdpRelay {
  readonly #mux: CdpMux;
  /** `devtools/browser/<id>`, the one browser endpoint. */
  readonly #browserPath: string;
  readonly #wss = new WebSocketServer({
    noServer: true,
    perMessageDeflate: false,
    maxPayload: CDP_MAX_PAYLOAD,
  });
  readonly #sockets = new Set<WebSocket>();
  #closed = false;

  /** `browserId`: the id in the public browser endpoint's path. */
  constructor(mux: CdpMux, browserId: string) {
    this.#mux = mux;
    this.#browserPath = `devtools/browser/${browserId}`;
  }

  /** Relay one upgrade request for `/cdp/<id>/<rest>`; refuses paths other than DevTools ones. */
  handle(rest: string, req: IncomingMessage, socket: Duplex, head: Buffer): void {
    socket.on('error', () => socket.destroy());
    if (this.#closed) return refuseUpgrade(socket, 404, 'The browser is not running');
    const target = this.#target(rest);
    if (!target) return refuseUpgrade(socket, 404, 'Unknown DevTools path');
    this.#mux.open(target).then(
      (client) => {
        // whatever becomes of the handshake, the session ends with the socket
        socket.once('close', () => client.close());
        if (this.#closed || socket.destroyed) return client.close();
        this.#wss.handleUpgrade(req, socket, head, (ws) => this.#join(ws, client));
      },
      () => refuseUpgrade(socket, 502, 'The browser refused the DevTools connection'),
    );
  }

  /** Close every relayed connection and refuse new ones. */
  closeAll(): void {
    this.#closed = true;
    for (const ws of this.#sockets) ws.terminate();
  }

  #target(rest: string): MuxTarget | undefined {
    if (rest === this.#browserPath) return { type: 'browser' };
    const page = PAGE_PATH.exec(rest)?.[1];
    return page ? { type: 'page', targetId: page } : undefined;
  }

  #join(ws: WebSocket, client: MuxClient): void {
    if (this.#closed) ws.terminate();
    this.#sockets.add(ws);
    ws.on('error', () => ws.terminate());
    ws.on('message', (data) => client.receive(data as Buffer)); // binaryType 'nodebuffer'
    ws.once('close', () => {
      this.#sockets.delete(ws);
      client.close();
    });
    client.connect({
      send: (data) => ws.send(data, { binary: false }),
      close: () => ws.close(),
    });
  }
}

/** Answer a WebSocket upgrade with a plain HTTP error `{"detail": message}` and close it. */
export function refuseUpgrade(socket: Duplex, status: number, message: string): void {
  if (socket.destroyed) return;
  const body = JSON.stringify({ detail: message });
  socket.end(
    `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ''}\r\n` +
      'Connection: close\r\nContent-Type: application/json\r\n' +
      `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
  );
}
