/**
 * The authenticated CDP relay behind `cdp_url`: a client WebSocket (token already checked by the
 * server) becomes one more connection on the browser's DevTools pipe (mux.ts), with a browser
 * session of its own, or a page session for `/devtools/page/<id>`. Nothing of the client's
 * request reaches Chromium (no headers, no socket: DevTools listen nowhere); messages are text
 * frames without compression, up to `CDP_MAX_COMMAND_BYTES` from a client (1009 past it); the
 * browser stopping closes every client.
 *
 * A client that does not read is closed (1008) once more than `CDP_MAX_UNREAD_BYTES` wait for it
 * and another message comes: what it leaves unread costs the server memory, and nobody else waits
 * for it (every client's messages are handed to its own socket). Both sizes are in the one table
 * of DevTools message sizes, src/api/cdp-limits.ts.
 */
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type WebSocket from 'ws';
import { WebSocketServer } from 'ws';
import { refuseUpgrade, serverError } from '../errors.js';
import type { Logger } from '../instances/runtime.js';
import type { CdpMux, MuxClient, MuxTarget } from './mux.js';
import { CDP_MAX_COMMAND_BYTES, CDP_MAX_UNREAD_BYTES } from '../../api/cdp-limits.js';

const PAGE_PATH = /^devtools\/page\/([A-Za-z0-9-]+)$/;

/** Close code and reason for a client that did not read (1008: policy violation). */
export const UNREAD_CLOSE = {
  code: 1008,
  reason: `CDP client too slow: over ${CDP_MAX_UNREAD_BYTES / 2 ** 20} MiB unread`,
};
/** How long a closed client's socket may take to finish the closing handshake. */
const CLOSE_GRACE_MS = 5000;

export class CdpRelay {
  readonly #mux: CdpMux;
  /** `devtools/browser/<id>`, the one browser endpoint. */
  readonly #browserPath: string;
  readonly #wss = new WebSocketServer({
    noServer: true,
    perMessageDeflate: false,
    maxPayload: CDP_MAX_COMMAND_BYTES,
  });
  readonly #sockets = new Set<WebSocket>();
  #closed = false;

  readonly #log: Logger | undefined;

  /** `browserId`: the id in the public browser endpoint's path. */
  constructor(mux: CdpMux, browserId: string, log?: Logger) {
    this.#mux = mux;
    this.#log = log;
    this.#browserPath = `devtools/browser/${browserId}`;
  }

  /** Relay one upgrade request for `/cdp/<id>/<rest>`; refuses paths other than DevTools ones. */
  handle(rest: string, req: IncomingMessage, socket: Duplex, head: Buffer): void {
    socket.on('error', () => socket.destroy());
    if (this.#closed) return refuseUpgrade(socket, serverError('cdp_browser_not_running'));
    const target = this.#target(rest);
    if (!target) return refuseUpgrade(socket, serverError('cdp_path_not_found'));
    this.#mux.open(target).then(
      (client) => {
        // whatever becomes of the handshake, the session ends with the socket
        socket.once('close', () => client.close());
        if (this.#closed || socket.destroyed) return client.close();
        this.#wss.handleUpgrade(req, socket, head, (ws) => this.#join(ws, client));
      },
      () => refuseUpgrade(socket, serverError('cdp_refused')),
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
    ws.on('message', (data) => {
      try {
        client.receive(data as Buffer); // binaryType 'nodebuffer'
      } catch (err) {
        this.#log?.error({ err }, 'a CDP client message failed');
        ws.close(1011, 'internal error');
      }
    });
    ws.once('close', () => {
      this.#sockets.delete(ws);
      client.close();
    });
    client.connect({
      send: (data) => {
        if (ws.readyState !== ws.OPEN) return;
        if (ws.bufferedAmount <= CDP_MAX_UNREAD_BYTES) return ws.send(data, { binary: false });
        this.#log?.warn({ unread: ws.bufferedAmount }, 'closing a CDP client that does not read');
        client.close();
        ws.close(UNREAD_CLOSE.code, UNREAD_CLOSE.reason);
        // it does not read its close frame either: what it left unread goes with the socket
        setTimeout(() => ws.terminate(), CLOSE_GRACE_MS).unref();
      },
      close: () => ws.close(),
    });
  }
}
