/**
 * The token-checked routes of src/server/http/app.ts with a hand-off's token (issue 23) and under
 * the per-client connection cap: a hand-off token opens the live view (its page gets the banner
 * with the message, only the page itself and only when it is served), and its socket, which
 * closes when the hand-off ends; it never opens `cdp_url`. A WebSocket or a live-view page with
 * the right token is still held to the connection cap (429), on a real HTTP server on loopback.
 */
import type { IncomingMessage } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { Duplex } from 'node:stream';
import Fastify, { type FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { until } from '../../src/internal/deadline.js';
import { HttpError, serverError } from '../../src/server/errors.js';
import { handleUpgrade, registerStreamPages } from '../../src/server/http/app.js';
import { defaultHttpLimits, guardServer } from '../../src/server/http/limits.js';
import { Handoffs } from '../../src/server/instances/handoffs.js';
import type { Registry } from '../../src/server/instances/registry.js';

const TOKEN = 'tok_0123456789abcdefABCDEF';
const PAGE = (rest: string) => `<html><body><p>${rest}</p></body></html>`;

let openClients = 0;
/** The runtime's sockets handed over by the upgrade routing. */
const upgraded: Duplex[] = [];
const handoffs = new Handoffs();
const rec = {
  id: 'inst_h',
  token: TOKEN,
  live: true,
  status: 'running',
  runtime: {
    upgrade: (_kind: string, _rest: string, _req: IncomingMessage, socket: Duplex) =>
      upgraded.push(socket),
    liveView: {
      url: async () => 'unused',
      // a page the live view does not serve: its name, or `?missing` on any
      page: async (rest: string, query: URLSearchParams) =>
        rest === 'gone.html' || query.has('missing')
          ? { status: 404, type: 'text/html', body: PAGE('not here') }
          : { status: 200, type: 'text/html', body: PAGE(rest) },
    },
  },
};
const registry = {
  get(id: string) {
    if (id !== rec.id) throw serverError('instance_not_found', { id });
    return rec;
  },
  handoffs,
  // the registry's count of open clients (an instance with one is not idle)
  connected: () => {
    openClients++;
    return () => void openClients--;
  },
  touch: () => {},
} as unknown as Registry;

/** A socket that records what the server writes. */
class RecordingSocket extends Duplex {
  written = '';
  override _read(): void {}
  override _write(chunk: Buffer, _enc: BufferEncoding, cb: () => void): void {
    this.written += chunk.toString();
    cb();
  }
}

function upgrade(url: string): { socket: RecordingSocket; passed: boolean } {
  const socket = new RecordingSocket();
  const before = upgraded.length;
  handleUpgrade(registry, { url, headers: {} } as IncomingMessage, socket, Buffer.alloc(0));
  return { socket, passed: upgraded.length > before && upgraded.at(-1) === socket };
}

describe('a hand-off token', () => {
  let app: FastifyInstance;
  beforeAll(async () => {
    app = Fastify();
    app.setErrorHandler((err: unknown, _req, reply) => {
      if (err instanceof HttpError) return reply.code(err.status).send({ detail: err.detail });
      return reply.code(500).send({ detail: String(err) });
    });
    registerStreamPages(app, registry);
    await app.ready();
  });
  afterAll(() => app.close());

  it('opens the live-view page with the banner, its message escaped; the page only', async () => {
    const h = handoffs.create(rec.id, 'Log in <b>now</b> & "press" Done', 600);
    for (const rest of ['', 'index.html']) {
      const res = await app.inject(`/stream/inst_h/${rest}?token=${h.token}`);
      expect(res.statusCode, rest).toBe(200);
      expect(res.body, rest).toContain(
        'Log in &lt;b&gt;now&lt;/b&gt; &amp; &quot;press&quot; Done',
      );
      expect(res.body, rest).toContain(`<p>${rest}</p>`);
      expect(res.body.endsWith('</body></html>'), rest).toBe(true);
    }
    // its scripts and a page the live view does not serve are left as they are
    const vnc = await app.inject(`/stream/inst_h/vnc.html?token=${h.token}`);
    expect(vnc.body).toBe(PAGE('vnc.html'));
    const gone = await app.inject(`/stream/inst_h/gone.html?token=${h.token}`);
    expect([gone.statusCode, gone.body]).toEqual([404, PAGE('not here')]);
    const missing = await app.inject(`/stream/inst_h/index.html?token=${h.token}&missing`);
    expect([missing.statusCode, missing.body]).toEqual([404, PAGE('not here')]);
    // the instance's own token opens the page without a banner
    const own = await app.inject(`/stream/inst_h/index.html?token=${TOKEN}`);
    expect(own.body).toBe(PAGE('index.html'));
    handoffs.end(h, 'done');
    const after = await app.inject(`/stream/inst_h/index.html?token=${h.token}`);
    expect(after.statusCode).toBe(401);
    // an instance nobody has is answered as a wrong live-view token
    const none = await app.inject(`/stream/inst_none/index.html?token=${h.token}`);
    expect([none.statusCode, none.json()]).toEqual([
      401,
      { detail: 'Invalid or expired live-view token' },
    ]);
  });

  it("opens the live view's socket, closed when the hand-off ends; never cdp_url", async () => {
    const h = handoffs.create(rec.id, 'm', 600);
    const view = upgrade(`/stream/inst_h/websockify?token=${h.token}`);
    expect(view.passed).toBe(true);
    const own = upgrade(`/stream/inst_h/websockify?token=${TOKEN}`);
    expect(own.passed).toBe(true);
    const cdp = upgrade(`/cdp/inst_h/devtools/browser/x?token=${h.token}`);
    expect(cdp.passed).toBe(false);
    expect(cdp.socket.written).toMatch(/^HTTP\/1\.1 401 /);
    expect(openClients).toBe(2); // the refused one is not counted
    handoffs.end(h, 'done');
    await new Promise((r) => setImmediate(r)); // Done's answer goes first
    expect(view.socket.destroyed).toBe(true);
    expect(own.socket.destroyed).toBe(false);
    own.socket.destroy();
    await new Promise((r) => setImmediate(r));
    expect(openClients).toBe(0); // closed, they keep the instance busy no more
  });
});

describe('the right token, past the per-client connection cap', () => {
  let app: FastifyInstance;
  let port = 0;
  beforeAll(async () => {
    app = Fastify();
    app.setErrorHandler((err: unknown, _req, reply) => {
      if (err instanceof HttpError) {
        return reply.code(err.status).headers(err.responseHeaders).send({ detail: err.detail });
      }
      return reply.code(500).send({ detail: String(err) });
    });
    registerStreamPages(app, registry);
    guardServer(app.server, { ...defaultHttpLimits, maxConnectionsPerClient: 1 }, {
      warn() {},
      info() {},
    } as never);
    app.server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) =>
      handleUpgrade(registry, req, socket, head),
    );
    await app.listen({ port: 0, host: '127.0.0.1' });
    port = (app.server.address() as AddressInfo).port;
  });
  afterAll(async () => {
    for (const s of upgraded.splice(0)) s.destroy();
    app.server.closeAllConnections();
    await app.close();
  });

  /** Send `head` on a new connection: what the server wrote, or whether it handed it over. */
  async function ask(head: string): Promise<{ answer: string; passed: boolean }> {
    const before = upgraded.length;
    const socket = connect(port, '127.0.0.1');
    let answer = '';
    socket.on('data', (d: Buffer) => (answer += d.toString()));
    socket.write(head);
    await until(() => answer !== '' || upgraded.length > before, {
      timeoutMs: 3000,
      intervalMs: 10,
    });
    return { answer, passed: upgraded.length > before };
  }
  const webSocket = (path: string) =>
    ask(
      `GET ${path} HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n` +
        'Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n',
    );

  it('a second WebSocket is a 429, not handed over; nor is a live-view page served', async () => {
    const first = await webSocket(`/cdp/inst_h/devtools/browser/x?token=${TOKEN}`);
    expect(first.passed).toBe(true);
    const second = await webSocket(`/cdp/inst_h/devtools/browser/x?token=${TOKEN}`);
    expect(second.passed).toBe(false);
    expect(second.answer).toMatch(/^HTTP\/1\.1 429 /);
    expect(second.answer).toMatch(/x-burrow-error: too_many_connections/);
    const page = await ask(
      `GET /stream/inst_h/index.html?token=${TOKEN} HTTP/1.1\r\nHost: x\r\n\r\n`,
    );
    expect(page.answer).toMatch(/^HTTP\/1\.1 429 /);
    expect(page.answer).not.toContain('<p>index.html</p>');
  });
});
