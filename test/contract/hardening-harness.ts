/**
 * What the HTTP hardening tests (hardening-http.test.ts) share: one real server with one ubuntu
 * instance for the whole file, and raw HTTP over `net` sockets, where a client library would hide
 * what the server does with malformed, slow or crowding requests.
 *
 * `server`, `port` and `ubuntuId` are set by the file's beforeAll (useServer) and read by the
 * tests through the module's live bindings.
 */
import net from 'node:net';
import { afterAll, beforeAll, expect } from 'vitest';
import { testServer, type TestServer } from '../helpers/server.js';

export let server: TestServer;
export let port = 0;
export let ubuntuId = '';

/** Starts the server and its ubuntu instance before the file's tests, closes it after them. */
export function useServer(): void {
  beforeAll(async () => {
    server = await testServer();
    port = Number(new URL(server.url).port);
    const res = await server.api('/v1/start', { json: { instance_type: 'ubuntu' } });
    expect(res.status).toBe(200);
    ubuntuId = ((await res.json()) as { id: string }).id;
  }, 180_000);

  afterAll(async () => {
    await server?.close();
  });
}

// ---------------------------------------------------------------------------------------------
// raw HTTP over net sockets

export interface Exchange {
  /** Everything the server sent before closing (or before the wait ran out). */
  text: string;
  status: number | undefined;
  /** The parsed JSON body, when there is one. */
  body: unknown;
  /** The server closed the connection (rather than the wait running out). */
  closed: boolean;
  /** Milliseconds from connecting to the close (or to the end of the wait). */
  ms: number;
}

export interface Connection {
  socket: net.Socket;
  /** Settles when the server closes the connection or the wait runs out. */
  result: Promise<Exchange>;
}

function parseExchange(text: string): Pick<Exchange, 'status' | 'body'> {
  const status = /^HTTP\/1\.1 (\d{3})/.exec(text)?.[1];
  const sep = text.indexOf('\r\n\r\n');
  let body: unknown;
  if (sep >= 0) {
    const len = /\r\ncontent-length: (\d+)/i.exec(text.slice(0, sep))?.[1];
    const rest = text.slice(sep + 4);
    try {
      body = JSON.parse(len === undefined ? rest : rest.slice(0, Number(len)));
    } catch {
      body = undefined;
    }
  }
  return { status: status === undefined ? undefined : Number(status), body };
}

/** Opens a connection (from `localAddress`, any 127.x reaches a loopback server) and records it. */
export function connect(opts: { localAddress?: string; waitMs?: number } = {}): Connection {
  const started = performance.now();
  const socket = net.connect({
    port,
    host: '127.0.0.1',
    ...(opts.localAddress && { localAddress: opts.localAddress }),
  });
  const chunks: Buffer[] = [];
  socket.on('data', (d) => chunks.push(d));
  socket.on('error', () => undefined);
  const result = new Promise<Exchange>((resolve) => {
    const finish = (closed: boolean) => {
      clearTimeout(timer);
      socket.destroy();
      const text = Buffer.concat(chunks).toString('latin1');
      resolve({ text, closed, ms: performance.now() - started, ...parseExchange(text) });
    };
    const timer = setTimeout(() => finish(false), opts.waitMs ?? 5_000);
    socket.once('close', () => finish(true));
  });
  return { socket, result };
}

/** Writes `data` on a new connection and collects the answer until the server closes. */
export function raw(data: string | Buffer, opts: { localAddress?: string; waitMs?: number } = {}) {
  const c = connect(opts);
  c.socket.write(data);
  return c.result;
}

/** Resolves once `socket` is connected (and the server has had a moment to count it). */
export const connected = (socket: net.Socket) =>
  new Promise<void>((resolve) => {
    if (!socket.connecting) resolve();
    else socket.once('connect', () => resolve());
  });

export const head = (method: string, path: string, headers: Record<string, string | number> = {}) =>
  [
    `${method} ${path} HTTP/1.1`,
    'Host: 127.0.0.1',
    'Connection: close',
    ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`),
    '',
    '',
  ].join('\r\n');

/** A complete request with the key, `body` and its Content-Length (unless `headers` says). */
export const request = (
  method: string,
  path: string,
  body: string | Buffer = '',
  headers: Record<string, string | number> = {},
) =>
  Buffer.concat([
    Buffer.from(
      head(method, path, {
        'x-api-key': server.apiKey,
        'Content-Length': Buffer.byteLength(body, 'latin1'),
        ...headers,
      }),
      'latin1',
    ),
    Buffer.isBuffer(body) ? body : Buffer.from(body, 'latin1'),
  ]);

export async function stillServing() {
  const res = await server.api('/v1/instances');
  expect(res.status).toBe(200);
  await res.arrayBuffer();
}

export const detailString = { detail: expect.any(String) as unknown };
