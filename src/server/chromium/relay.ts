/**
 * The authenticated CDP relay behind `cdp_url`: a client WebSocket (token already checked by the
 * server) becomes one more connection on the browser's DevTools pipe (mux.ts), with a browser
 * session of its own, or a page session for `/devtools/page/<id>`. Nothing of the client's
 * request reaches Chromium (no headers, no socket: DevTools listen nowhere); messages are text
 * frames without compression, up to `CDP_MAX_COMMAND_BYTES` from a client (1009 past it),
 * unmasked as their bytes arrive (unmask.ts: `ws` alone held the main thread for a whole large
 * frame); the browser stopping closes every client.
 *
 * A client that does not read is closed (1008) once more than `CDP_MAX_UNREAD_BYTES` wait for it
 * and another message comes: what it leaves unread costs the server memory, and nobody else waits
 * for it (every client's messages are handed to its own socket). What all clients leave unread is
 * bounded too, per browser and across every browser of the server: past either total the client
 * with the most unread is closed (1008) the same way, so six slow readers cannot each hold their
 * own bound (issue 35). A browser accepts at most `CDP_MAX_CLIENTS_PER_BROWSER` clients, from
 * any address (429 past it). The sizes are in the one table of DevTools message sizes,
 * src/api/cdp-limits.ts.
 */
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type WebSocket from 'ws';
import { WebSocketServer } from 'ws';
import { refuseUpgrade, serverError } from '../errors.js';
import type { Logger } from '../instances/runtime.js';
import type { CdpMux, MuxClient, MuxTarget } from './mux.js';
import { unmaskAsReceived } from './unmask.js';
import {
  CDP_MAX_CLIENTS_PER_BROWSER,
  CDP_MAX_COMMAND_BYTES,
  CDP_MAX_UNREAD_BYTES,
  CDP_MAX_UNREAD_BYTES_PER_BROWSER,
  CDP_MAX_UNREAD_BYTES_TOTAL,
} from '../../api/cdp-limits.js';

const PAGE_PATH = /^devtools\/page\/([A-Za-z0-9-]+)$/;

/** Close code and reason for a client that did not read (1008: policy violation). */
export const UNREAD_CLOSE = {
  code: 1008,
  reason: `CDP client too slow: over ${CDP_MAX_UNREAD_BYTES / 2 ** 20} MiB unread`,
};
const MiB = 2 ** 20;
/** Close codes and reasons for a client closed because all clients together left too much. */
export const BROWSER_UNREAD_CLOSE = {
  code: 1008,
  reason: `CDP clients of this browser too slow: over ${CDP_MAX_UNREAD_BYTES_PER_BROWSER / MiB} MiB unread together; the slowest is closed`,
};
export const SERVER_UNREAD_CLOSE = {
  code: 1008,
  reason: `CDP clients of this server too slow: over ${CDP_MAX_UNREAD_BYTES_TOTAL / MiB} MiB unread together; the slowest is closed`,
};
/** A client with less than this unread never makes the totals be summed (a reader keeps up). */
const TOTALS_FROM_BYTES = 1 * MiB;

type Closing = { code: number; reason: string };
/** Every relay client of the server (of every browser) → how to close it for being too slow. */
const everyone = new Map<WebSocket, (why: Closing) => void>();

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
  readonly #sockets = new Map<WebSocket, (why: Closing) => void>();
  /** Clients being attached, not yet in `#sockets`. */
  #opening = 0;
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
    if (this.#sockets.size + this.#opening >= CDP_MAX_CLIENTS_PER_BROWSER) {
      const limit = CDP_MAX_CLIENTS_PER_BROWSER;
      return refuseUpgrade(socket, serverError('cdp_too_many_clients', { limit }));
    }
    this.#opening++;
    this.#mux.open(target).then(
      (client) => {
        this.#opening--;
        // whatever becomes of the handshake, the session ends with the socket
        socket.once('close', () => client.close());
        if (this.#closed || socket.destroyed) return client.close();
        this.#wss.handleUpgrade(req, socket, head, (ws) => {
          unmaskAsReceived(ws, CDP_MAX_COMMAND_BYTES);
          this.#join(ws, client);
        });
      },
      () => {
        this.#opening--;
        refuseUpgrade(socket, serverError('cdp_refused'));
      },
    );
  }

  /** Close every relayed connection and refuse new ones. */
  closeAll(): void {
    this.#closed = true;
    for (const ws of this.#sockets.keys()) ws.terminate();
  }

  #target(rest: string): MuxTarget | undefined {
    if (rest === this.#browserPath) return { type: 'browser' };
    const page = PAGE_PATH.exec(rest)?.[1];
    return page ? { type: 'page', targetId: page } : undefined;
  }

  #join(ws: WebSocket, client: MuxClient): void {
    if (this.#closed) ws.terminate();
    const tooSlow = (why: Closing) => {
      this.#log?.warn(
        { unread: ws.bufferedAmount, why: why.reason },
        'closing a CDP client that does not read',
      );
      client.close();
      ws.close(why.code, why.reason);
      // it does not read its close frame either: what it left unread goes with the socket
      setTimeout(() => ws.terminate(), CLOSE_GRACE_MS).unref();
    };
    this.#sockets.set(ws, tooSlow);
    everyone.set(ws, tooSlow);
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
      everyone.delete(ws);
      client.close();
    });
    client.connect({
      send: (data) => {
        if (ws.readyState !== ws.OPEN) return;
        if (ws.bufferedAmount > CDP_MAX_UNREAD_BYTES) return tooSlow(UNREAD_CLOSE);
        ws.send(data, { binary: false });
        if (ws.bufferedAmount < TOTALS_FROM_BYTES) return;
        closeSlowest(this.#sockets, CDP_MAX_UNREAD_BYTES_PER_BROWSER, BROWSER_UNREAD_CLOSE);
        closeSlowest(everyone, CDP_MAX_UNREAD_BYTES_TOTAL, SERVER_UNREAD_CLOSE);
      },
      close: (why) => {
        ws.close(why?.code, why?.reason);
        if (why) setTimeout(() => ws.terminate(), CLOSE_GRACE_MS).unref();
      },
      // what waits for Chromium's pipe is bounded by not reading clients (inbound.ts)
      pause: () => ws.pause(),
      resume: () => ws.resume(),
    });
  }
}

/**
 * When `clients` leave more than `limit` bytes unread together (those already closing count: their
 * bytes are still held), the open one with the most unread is closed.
 */
function closeSlowest(
  clients: ReadonlyMap<WebSocket, (why: Closing) => void>,
  limit: number,
  why: Closing,
): void {
  let total = 0;
  let slowest: WebSocket | undefined;
  for (const ws of clients.keys()) {
    total += ws.bufferedAmount;
    if (ws.readyState !== ws.OPEN) continue;
    if (!slowest || ws.bufferedAmount > slowest.bufferedAmount) slowest = ws;
  }
  if (total > limit && slowest) clients.get(slowest)?.(why);
}
