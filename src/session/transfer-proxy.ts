/**
 * The transfer proxy's listener: a loopback WebSocket server on a random path, which for each
 * driver connection first opens the instance's `cdp_url` (so a refusal there reaches the driver
 * as its own status and body), then relays the two through a `Link` (transfer-link.ts).
 */
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import WebSocket, { WebSocketServer } from 'ws';
import { CDP_MAX_COMMAND_BYTES, CDP_MAX_MESSAGE_BYTES } from '../api/index.js';
import { UploadCache, type TransferApi } from './transfer-api.js';
import { Link } from './transfer-link.js';

export interface TransferProxyOptions {
  /** The instance's `cdp_url` (browser endpoint). */
  cdpUrl: string;
  api: TransferApi;
  /** Shared by the proxies of one session: local file → in-instance path. */
  uploads?: UploadCache;
  /**
   * The driver retries a failed `DOM.setFileInputFiles` until its timeout (Playwright): the
   * proxy then ends the retries at once (see `Link.#setFiles`). Default false (Puppeteer fails
   * on the first error).
   */
  retriesFileInputs?: boolean;
}

/** The local CDP proxy in front of one `cdp_url`. */
export class TransferProxy {
  /** The URL to give the driver: `ws://127.0.0.1:<port>/<random>`. */
  readonly url: string;
  readonly #server: Server;
  readonly #wss: WebSocketServer;
  readonly #links = new Set<Link>();
  #closed: Promise<void> | undefined;

  private constructor(server: Server, wss: WebSocketServer, url: string) {
    this.#server = server;
    this.#wss = wss;
    this.url = url;
  }

  static async open(opts: TransferProxyOptions): Promise<TransferProxy> {
    const secret = randomBytes(18).toString('base64url');
    const path = `/${secret}/devtools/browser`;
    const server = createServer((_req, res) => res.writeHead(404).end());
    const wss = new WebSocketServer({
      noServer: true,
      perMessageDeflate: false,
      // commands from the driver: what the server's relay takes from a client
      maxPayload: CDP_MAX_COMMAND_BYTES,
      // the bytes are relayed, not read: the driver and the browser check their own input
      skipUTF8Validation: true,
    });
    const uploads = opts.uploads ?? new UploadCache();
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => resolve());
    });
    const { port } = server.address() as AddressInfo;
    server.unref(); // a session's proxy never holds the process by itself (keepalive.ts)
    const proxy = new TransferProxy(server, wss, `ws://127.0.0.1:${port}${path}`);
    server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
      socket.on('error', () => socket.destroy());
      if (req.url !== path || proxy.#closed) {
        socket.end('HTTP/1.1 404 Not Found\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
        return;
      }
      // the instance's socket first: a refusal there is the driver's answer, status and body
      const remote = new WebSocket(opts.cdpUrl, {
        perMessageDeflate: false,
        // the browser's messages: what the server's relay sends at most
        maxPayload: CDP_MAX_MESSAGE_BYTES,
        skipUTF8Validation: true,
      });
      let answered = false;
      const refuse = (status: number, reason: string, body: Buffer) => {
        if (answered) return;
        answered = true;
        const head =
          `HTTP/1.1 ${status} ${reason.replace(/[^\x20-\x7e]/g, '')}\r\nConnection: close\r\n` +
          `Content-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`;
        socket.end(Buffer.concat([Buffer.from(head, 'latin1'), body]));
      };
      socket.once('close', () => {
        if (remote.readyState === WebSocket.CONNECTING) remote.terminate();
      });
      remote.once('unexpected-response', (_req, res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.once('end', () => {
          refuse(res.statusCode ?? 502, res.statusMessage ?? '', Buffer.concat(chunks));
          remote.terminate();
        });
        res.once('error', () => socket.destroy());
      });
      remote.on('error', (err) => {
        const where = redactedUrl(opts.cdpUrl);
        const detail = JSON.stringify({ detail: `cannot reach ${where}: ${err.message}` });
        refuse(502, 'Bad Gateway', Buffer.from(detail));
      });
      remote.once('open', () => {
        answered = true;
        if (proxy.#closed || socket.destroyed) return remote.terminate();
        wss.handleUpgrade(req, socket, head, (ws) => {
          const link = new Link(ws, remote, opts.api, uploads, opts.retriesFileInputs ?? false);
          proxy.#links.add(link);
          ws.once('close', () => proxy.#links.delete(link));
        });
      });
    });
    return proxy;
  }

  /** Closes every relayed connection and the listener. Idempotent. */
  close(): Promise<void> {
    return (this.#closed ??= (async () => {
      for (const link of this.#links) link.close();
      this.#wss.close();
      await new Promise<void>((resolve) => this.#server.close(() => resolve()));
    })());
  }
}

/** `url` without its query (where `cdp_url` carries the instance's token). */
function redactedUrl(url: string): string {
  const q = url.indexOf('?');
  return q < 0 ? url : `${url.slice(0, q)}?…`;
}
