/**
 * Cluster mode: a request for an instance of another node goes to that node in one hop. The
 * instance id says which node owns it (../../cluster/ids.ts), so a node forwards without asking the
 * database, and refuses a forged or foreign id (404) before anything else happens.
 *
 * - **HTTP.** Every route under `/v1/instance/{id}` and the live-view pages under
 *   `/stream/{id}/`, after this node checked the API key: method, path, headers and the body
 *   stream as they came (an upload is not held here; the owner enforces its limit), and the
 *   owner's answer streamed back as it comes.
 * - **WebSockets.** `cdp_url` and live-view upgrades (`/cdp/{id}/…`, `/stream/{id}/…`): the
 *   handshake goes to the owner, and after its 101 the two sockets are joined byte for byte.
 * - **One hop.** A forwarded request carries `x-burrow-forwarded-by`; a node never forwards such
 *   a request again (two nodes that disagree on an owner cannot bounce it between them).
 * - **The client.** A forwarded request carries the client's address, signed
 *   (../../cluster/forwarded-client.ts), for the owner's per-client connection cap; what the
 *   client itself sent in that header is dropped. `x-forwarded-for` is kept for logs and
 *   proxies, never believed.
 * - **An owner that is gone**, declared dead (../../cluster/death.ts) or left the cluster.
 *   `GET /v1/instance/{id}` is answered here from the shared row (for a lost node `error`,
 *   `end_reason: "node_lost"`); everything else, WebSocket upgrades included, is 410
 *   (`instance_node_lost`, or `instance_gone` after a node left). A joined socket whose owner vanished (the
 *   connection to it ended without a WebSocket close, and the owner no longer answers a probe)
 *   is closed towards the client with code 4001, reason `node_lost`, when the cut fell between
 *   two frames (else it is cut too: a close frame in the middle of one would corrupt it).
 */
import { request as httpRequest, type IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { Agent } from 'undici';
import type { Route } from '../../cluster/node.js';
import { CLIENT_HEADER, type ClientSigner } from '../../cluster/forwarded-client.js';
import { HttpError, refuseUpgrade, serverError } from '../../errors.js';
import { NODE_LOST_CLOSE, probeOnce } from '../../cluster/death.js';

export const FORWARDED_BY = 'x-burrow-forwarded-by';

/** Which node answers for an instance id (`ClusterNode.route`). */
export interface InstanceRouter {
  readonly name: string;
  route(id: string): Promise<Route>;
  /** Read the nodes again (after an owner did not answer: it may have left or been lost). */
  refresh?(): Promise<void>;
}

/** Headers that belong to one connection, not to the request (RFC 9110 §7.6.1), and `host`. */
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authenticate',
  'proxy-authorization',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'host',
]);

const INSTANCE_PATH = /^\/(?:v1\/instance|stream|cdp)\/([^/?#]+)/;

/**
 * The answer for an id no node has: the API's 404, but on the token-checked routes (`cdp_url`,
 * the live view), which need no key, the 401 of a wrong token (../handoff.ts, `tokenRoute`).
 */
const unknownId = (id: string, url: string) =>
  url.startsWith('/cdp/')
    ? serverError('token_invalid', { kind: 'CDP' })
    : url.startsWith('/stream/')
      ? serverError('token_invalid', { kind: 'live-view' })
      : serverError('instance_not_found', { id });

/** The instance id a path names, decoded, or undefined. */
export function instanceIdOf(url: string): string | undefined {
  const m = INSTANCE_PATH.exec(url);
  if (!m) return undefined;
  try {
    return decodeURIComponent(m[1]!);
  } catch {
    return m[1];
  }
}

/**
 * `req`'s headers as a hop sends them on to `path` (the request's target as the owner receives
 * it): without hop-by-hop ones, marked forwarded by `from`, with the client's address signed for
 * the owner when there is a `signer`.
 */
export function forwardHeaders(
  req: IncomingMessage,
  from: string,
  path: string,
  signer: ClientSigner | undefined,
): Record<string, string | string[]> {
  const { headers } = req;
  const client = req.socket.remoteAddress;
  const out: Record<string, string | string[]> = {};
  for (const [k, v] of Object.entries(headers)) {
    if (v === undefined || HOP_BY_HOP.has(k) || k === CLIENT_HEADER) continue;
    out[k] = v;
  }
  out[FORWARDED_BY] = from;
  if (client) {
    const before = headers['x-forwarded-for'];
    out['x-forwarded-for'] = before ? `${String(before)}, ${client}` : client;
    // what the owner counts against the client's connection cap
    if (signer) {
      out[CLIENT_HEADER] = signer.sign(client, req.method ?? 'GET', path);
    }
  }
  return out;
}

/** Answers for another node's instances; `hook` is an `onRequest` hook of the app. */
export class Forwarder {
  readonly #router: InstanceRouter;
  readonly #signer: ClientSigner | undefined;
  readonly #agent = new Agent({ keepAliveTimeout: 30_000, connections: 64 });

  /** `signer`: signs the client's address for the owner (../../cluster/forwarded-client.ts). */
  constructor(router: InstanceRouter, signer?: ClientSigner) {
    this.#router = router;
    this.#signer = signer;
  }

  /** Which node answers for instance `id` (the MCP tools' calls go there too: ../mcp.ts). */
  route(id: string): Promise<Route> {
    return this.#router.route(id);
  }

  /**
   * Where the request goes: `local`, or the owner's URL; throws 404 for a foreign id and 410 for
   * an instance of a lost node (but its row, which is read here).
   */
  async #target(
    method: string | undefined,
    url: string,
    headers: IncomingMessage['headers'],
  ): Promise<{ node: string; url: string } | 'local'> {
    const id = instanceIdOf(url);
    if (id === undefined) return 'local';
    const route = await this.#router.route(id);
    if (route === 'unknown') throw unknownId(id, url);
    if (route === 'local') return 'local';
    if (route.ended) {
      const path = url.split('?', 1)[0]!.replace(/\/+$/, '');
      if ((method === 'GET' || method === 'HEAD') && /^\/v1\/instance\/[^/]+$/.test(path)) {
        return 'local';
      }
      if (route.ended === 'lost') throw serverError('instance_node_lost', { id, node: route.node });
      throw serverError('instance_gone', {
        id,
        state: `gone with its node ${route.node}, which left the cluster`,
      });
    }
    if (headers[FORWARDED_BY] !== undefined) {
      // the node that sent it thinks this one owns it: one hop only
      throw unknownId(id, url);
    }
    return route;
  }

  /** An `onRequest` hook: forwards a request for another node's instance, else does nothing. */
  hook = async (req: FastifyRequest, reply: FastifyReply): Promise<FastifyReply | undefined> => {
    const target = await this.#target(req.method, req.url, req.headers);
    if (target === 'local') return undefined;
    const id = instanceIdOf(req.url)!;
    const hasBody = req.method !== 'GET' && req.method !== 'HEAD';
    let answer;
    try {
      // the path as it came, never resolved against the owner's URL (`new URL` would remove
      // its dot segments: `/v1/instance/{id}/../../start` is not the request checked here)
      answer = await this.#agent.request({
        origin: new URL(target.url).origin,
        path: req.url,
        method: req.method as 'GET',
        headers: forwardHeaders(req.raw, this.#router.name, req.url, this.#signer),
        ...(hasBody && { body: req.raw }),
        headersTimeout: 0, // an instance's long call (a bash command) answers when it is done
        bodyTimeout: 0,
      });
    } catch (err) {
      // the owner may have left or been declared lost since this node last looked
      if (this.#router.refresh) {
        await this.#router.refresh().catch(() => {});
        const again = await this.#target(req.method, req.url, req.headers);
        if (again === 'local') return undefined;
      }
      throw serverError('node_unreachable', {
        id,
        node: target.node,
        reason: (err as Error).message,
      });
    }
    reply.hijack();
    const res = reply.raw;
    const headers: Record<string, string | string[]> = {};
    for (const [k, v] of Object.entries(answer.headers)) {
      if (v !== undefined && !HOP_BY_HOP.has(k)) headers[k] = v;
    }
    res.writeHead(answer.statusCode, headers);
    // piped, not `pipeline()`: that one makes an AbortController per call and aborts it when
    // done, a DOMException with its stack on every request (bench/cluster.ts measured it)
    const body = answer.body;
    body.on('error', () => res.destroy()); // the owner went away mid-body
    res.on('close', () => {
      if (!body.readableEnded) body.destroy(); // the client went away
    });
    body.pipe(res);
    return reply;
  };

  /**
   * Routes a WebSocket upgrade: `local` ones go to `handle`; another node's are joined to it.
   */
  upgrade(
    req: IncomingMessage,
    socket: Duplex,
    head: Buffer,
    handle: (req: IncomingMessage, socket: Duplex, head: Buffer) => void,
  ): void {
    socket.on('error', () => socket.destroy());
    this.#target(req.method, req.url ?? '/', req.headers).then(
      (target) => {
        if (target === 'local') return handle(req, socket, head);
        this.#join(target, req, socket, head);
      },
      (err: unknown) =>
        refuseUpgrade(socket, err instanceof HttpError ? err : serverError('internal_error')),
    );
  }

  #join(
    target: { node: string; url: string },
    req: IncomingMessage,
    socket: Duplex,
    head: Buffer,
  ): void {
    const id = instanceIdOf(req.url ?? '/')!;
    const owner = new URL(target.url);
    const path = req.url ?? '/';
    const headers = forwardHeaders(req, this.#router.name, path, this.#signer);
    headers.connection = 'Upgrade';
    headers.upgrade = req.headers.upgrade ?? 'websocket';
    // the path as it came, as for HTTP above
    const out = httpRequest({
      protocol: owner.protocol,
      hostname: owner.hostname.replace(/^\[(.*)\]$/, '$1'), // an IPv6 address, unbracketed
      port: owner.port,
      path,
      method: req.method,
      headers,
    });
    out.on('upgrade', (res, upstream, upHead) => {
      const lines = [`HTTP/1.1 ${res.statusCode} ${res.statusMessage}`];
      for (let i = 0; i < res.rawHeaders.length; i += 2) {
        lines.push(`${res.rawHeaders[i]}: ${res.rawHeaders[i + 1]}`);
      }
      socket.write(`${lines.join('\r\n')}\r\n\r\n`);
      const frames = new FrameBoundary();
      frames.feed(upHead);
      if (upHead.length > 0) socket.write(upHead);
      if (head.length > 0) upstream.write(head);
      let clientGone = false;
      socket.on('close', () => {
        clientGone = true;
        upstream.destroy();
      });
      upstream.on('data', (chunk: Buffer) => frames.feed(chunk));
      upstream.on('error', () => {}); // 'close' follows and decides
      upstream.on('close', () => {
        if (clientGone || frames.closed || !frames.atBoundary) return void socket.destroy();
        // cut without a WebSocket close: the owner went away, or only this connection did
        void probeOnce(target.url, 1000).then((alive) => {
          if (alive || socket.destroyed) return void socket.destroy();
          socket.end(closeFrame(NODE_LOST_CLOSE.code, NODE_LOST_CLOSE.reason));
          setTimeout(() => socket.destroy(), 2_000).unref();
        });
      });
      upstream.pipe(socket, { end: false });
      socket.pipe(upstream);
    });
    out.on('response', (res) => {
      // the owner refused the upgrade: its answer goes to the client as it is
      const lines = [`HTTP/1.1 ${res.statusCode} ${res.statusMessage}`];
      for (let i = 0; i < res.rawHeaders.length; i += 2) {
        const name = res.rawHeaders[i]!;
        if (HOP_BY_HOP.has(name.toLowerCase())) continue;
        lines.push(`${name}: ${res.rawHeaders[i + 1]}`);
      }
      lines.push('connection: close');
      socket.write(`${lines.join('\r\n')}\r\n\r\n`);
      res.pipe(socket);
    });
    out.on('error', (err) =>
      refuseUpgrade(
        socket,
        serverError('node_unreachable', { id, node: target.node, reason: err.message }),
      ),
    );
    out.end();
  }

  close(): Promise<void> {
    return this.#agent.close();
  }
}

/** An unmasked close frame (server to client, RFC 6455 §5.5.1): `code` and a short reason. */
export function closeFrame(code: number, reason: string): Buffer {
  const text = Buffer.from(reason, 'utf8').subarray(0, 123);
  const out = Buffer.alloc(4 + text.length);
  out[0] = 0x88; // FIN + opcode close
  out[1] = 2 + text.length;
  out.writeUInt16BE(code, 2);
  text.copy(out, 4);
  return out;
}

/**
 * Follows the frames of one direction of a WebSocket without holding any of them: whether the
 * bytes so far end on a frame boundary, and whether a close frame went by. Frames are read only
 * as far as their headers; payloads are counted, never copied.
 */
export class FrameBoundary {
  /** Header bytes of the frame being read (at most 14). */
  #header: number[] = [];
  /** Payload bytes still to come of the current frame. */
  #left = 0;
  closed = false;

  get atBoundary(): boolean {
    return this.#header.length === 0 && this.#left === 0;
  }

  feed(chunk: Buffer): void {
    let i = 0;
    while (i < chunk.length) {
      if (this.#left > 0) {
        const n = Math.min(this.#left, chunk.length - i);
        this.#left -= n;
        i += n;
        continue;
      }
      this.#header.push(chunk[i++]!);
      const need = headerLength(this.#header);
      if (need === undefined || this.#header.length < need) continue;
      const h = this.#header;
      if ((h[0]! & 0x0f) === 0x8) this.closed = true;
      const len7 = h[1]! & 0x7f;
      let len = len7;
      if (len7 === 126) len = (h[2]! << 8) | h[3]!;
      else if (len7 === 127) len = Number(Buffer.from(h.slice(2, 10)).readBigUInt64BE());
      this.#header = [];
      this.#left = len;
    }
  }
}

/** The length of a frame header from its first bytes, or undefined until the second is known. */
function headerLength(h: readonly number[]): number | undefined {
  if (h.length < 2) return undefined;
  const len7 = h[1]! & 0x7f;
  const masked = (h[1]! & 0x80) !== 0 ? 4 : 0;
  return 2 + (len7 === 126 ? 2 : len7 === 127 ? 8 : 0) + masked;
}
