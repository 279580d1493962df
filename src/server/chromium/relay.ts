/**
 * The authenticated CDP relay: a client WebSocket (token already checked by the server) is
 * joined to the same path on this browser's loopback DevTools port. Frames pass through
 * untouched, text stays text and binary stays binary; no client header reaches Chromium (no
 * `Origin`, `Host` is 127.0.0.1), and either side closing closes the other.
 */
import { STATUS_CODES, type IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import WebSocket, { WebSocketServer } from 'ws';
import { CDP_MAX_PAYLOAD } from './cdp.js';

/** The DevTools paths a client may reach: the browser endpoint or one page. */
const DEVTOOLS_PATH = /^devtools\/(?:browser|page)\/[A-Za-z0-9-]+$/;

export class CdpRelay {
  readonly #port: number;
  readonly #wss = new WebSocketServer({
    noServer: true,
    perMessageDeflate: false,
    maxPayload: CDP_MAX_PAYLOAD,
  });
  readonly #sockets = new Set<WebSocket>();
  #closed = false;

  constructor(devtoolsPort: number) {
    this.#port = devtoolsPort;
  }

  /** Relay one upgrade request for `/cdp/<id>/<rest>`; refuses paths other than DevTools ones. */
  handle(rest: string, req: IncomingMessage, socket: Duplex, head: Buffer): void {
    socket.on('error', () => socket.destroy());
    if (this.#closed) return refuseUpgrade(socket, 404, 'The browser is not running');
    if (!DEVTOOLS_PATH.test(rest)) return refuseUpgrade(socket, 404, 'Unknown DevTools path');

    const upstream = this.#track(
      new WebSocket(`ws://127.0.0.1:${this.#port}/${rest}`, {
        perMessageDeflate: false,
        maxPayload: CDP_MAX_PAYLOAD,
      }),
    );
    upstream.once('error', () =>
      refuseUpgrade(socket, 502, 'The browser refused the DevTools connection'),
    );
    upstream.once('open', () => {
      upstream.removeAllListeners('error');
      upstream.on('error', () => upstream.terminate());
      if (socket.destroyed) return upstream.terminate();
      this.#wss.handleUpgrade(req, socket, head, (client) => join(this.#track(client), upstream));
    });
  }

  /** Close every relayed connection and refuse new ones. */
  closeAll(): void {
    this.#closed = true;
    for (const ws of this.#sockets) ws.terminate();
  }

  #track(ws: WebSocket): WebSocket {
    if (this.#closed) ws.terminate();
    this.#sockets.add(ws);
    ws.once('close', () => this.#sockets.delete(ws));
    return ws;
  }
}

function join(client: WebSocket, upstream: WebSocket): void {
  client.on('error', () => client.terminate());
  for (const [from, to] of [
    [client, upstream],
    [upstream, client],
  ] as const) {
    from.on('message', (data, isBinary) => to.send(data, { binary: isBinary }));
    from.once('close', () => to.close());
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
