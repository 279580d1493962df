/**
 * What the egress tests share (egress.test.ts, egress-connections.test.ts): `Egress` behind a
 * listener on 127.0.0.1:0 (`startProxy`), origin servers on 127.0.0.1 that name themselves, a raw
 * TCP echo, a closed port, an HTTPS server when openssl exists, and the clients that speak to
 * the proxy (Node's http, raw sockets, curl). Loopback is "the host" here, so the operator flags
 * decide what each test may reach.
 */
import { execFile, execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import tls from 'node:tls';
import { afterAll, afterEach, beforeAll } from 'vitest';
import { until as pollUntil } from '../../../src/internal/deadline.js';
import type { Logger } from '../../../src/server/instances/runtime.js';
import {
  Egress,
  type EgressOptions,
  type EgressPolicy,
} from '../../../src/server/sandbox/egress/egress.js';

export const quiet: Logger = { info() {}, warn() {}, error() {}, debug() {} };

/** Sockets each test server accepted, destroyed when it closes. */
export const accepted = new WeakMap<net.Server, Set<net.Socket>>();
export const listen = async <T extends net.Server>(server: T): Promise<number> => {
  const sockets = new Set<net.Socket>();
  accepted.set(server, sockets);
  // A TLS server's sockets come as `secureConnection`; Node's TLS server socket can stay open
  // after the peer closed (curl), which would hold `close()` forever.
  for (const event of ['connection', 'secureConnection']) {
    server.on(event, (s: net.Socket) => {
      sockets.add(s);
      s.once('close', () => sockets.delete(s));
    });
  }
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as AddressInfo).port;
};
export const closeServer = (server: net.Server) =>
  new Promise<void>((resolve) => {
    server.close(() => resolve());
    for (const s of accepted.get(server) ?? []) s.destroy();
  });

/** An origin that names itself and echoes what it was asked. */
export function origin(name: string): http.Server {
  return http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.url?.startsWith('/slow') && !res.headersSent) {
        res.flushHeaders(); // then silence: a long poll
        setTimeout(() => res.end('slow done'), 600);
        return;
      }
      res.setHeader('content-type', 'application/json');
      res.end(
        JSON.stringify({
          name,
          method: req.method,
          url: req.url,
          host: req.headers.host,
          proxyAuth: req.headers['proxy-authorization'] ?? null,
          body: Buffer.concat(chunks).toString(),
        }),
      );
    });
  });
}

export let originA: http.Server;
export let originB: http.Server;
export let portA: number;
export let portB: number;
/** Raw TCP: echoes, answers "bye" after the client half-closes, counts the bytes it received. */
export let echo: net.Server;
export let echoPort: number;
export let echoReceived = 0;
export const echoSockets = new Set<net.Socket>();
/** A closed port: something listened there a moment ago. */
export let deadPort: number;
/** HTTPS with a self-signed cert for `ok.test`, when openssl exists. */
export let tlsServer: tls.Server | undefined;
export let tlsPort = 0;
export let certDir: string | undefined;
export const has = (cmd: string, arg: string) => {
  try {
    execFileSync(cmd, [arg], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
};
export const hasCurl = has('curl', '--version');
export const hasOpenssl = has('openssl', 'version');

export interface Proxy {
  port: number;
  egress: Egress;
  /** Client connections the listener accepted. */
  accepted: number;
  close(): Promise<void>;
}
export const proxies: Proxy[] = [];

export async function startProxy(
  policy: Partial<EgressPolicy>,
  options: EgressOptions = {},
  log: Logger = quiet,
) {
  const egress = new Egress(
    {
      blockedDomains: [],
      allowHostLoopback: false,
      allowHostPorts: [],
      protectedPorts: () => [],
      ...policy,
    },
    log,
    options,
  );
  const proxy: Proxy = {
    port: 0,
    egress,
    accepted: 0,
    close: async () => {
      egress.close();
      await closeServer(listener);
    },
  };
  const listener = net.createServer({ allowHalfOpen: true }, (socket) => {
    proxy.accepted++;
    egress.handle(socket);
  });
  proxy.port = await listen(listener);
  proxies.push(proxy);
  return proxy;
}

export interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}

/** An absolute-form request through the proxy. */
export function viaProxy(
  proxy: Proxy,
  url: string,
  opts: {
    headers?: Record<string, string>;
    agent?: http.Agent;
    method?: string;
    body?: string;
  } = {},
): Promise<Answer & { reused: boolean }> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: '127.0.0.1',
        port: proxy.port,
        path: url,
        method: opts.method ?? 'GET',
        // A client configured for a proxy names the origin in Host (Node's own would name the proxy).
        headers: { Host: new URL(url).host, ...opts.headers },
        agent: opts.agent ?? false,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          resolve({
            status: res.statusCode!,
            headers: res.headers,
            body: Buffer.concat(chunks).toString(),
            reused: req.reusedSocket,
          }),
        );
      },
    );
    req.on('error', reject);
    req.end(opts.body);
  });
}

/** Read one response head from a raw socket; what follows it stays readable. */
export function readHead(socket: net.Socket): Promise<string> {
  return new Promise((resolve, reject) => {
    let buf = Buffer.alloc(0);
    const onData = (d: Buffer) => {
      buf = Buffer.concat([buf, d]);
      const end = buf.indexOf('\r\n\r\n');
      if (end < 0) return;
      socket.off('data', onData);
      socket.off('close', onClose);
      socket.pause();
      const rest = buf.subarray(end + 4);
      if (rest.length > 0) socket.unshift(rest);
      resolve(buf.subarray(0, end).toString());
    };
    const onClose = () => reject(new Error(`closed before a response head: ${buf.toString()}`));
    socket.on('data', onData);
    socket.once('close', onClose);
  });
}

/** Everything the server sends until it closes (errors count as a close), or `ms` passed. */
export function readAll(socket: net.Socket, ms = 10_000): Promise<string> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    const timer = setTimeout(() => socket.destroy(), ms);
    socket.once('close', () => clearTimeout(timer));
    socket.on('data', (d: Buffer) => chunks.push(d));
    socket.on('error', () => {});
    socket.once('close', () => resolve(Buffer.concat(chunks).toString()));
    socket.resume();
  });
}

export function rawConnect(proxy: Proxy): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const s = net.connect(proxy.port, '127.0.0.1', () => resolve(s));
    s.on('error', reject);
  });
}

/** `CONNECT target` and its answer's head; on 200 the socket is the tunnel. */
export async function connect(
  proxy: Proxy,
  target: string,
): Promise<{ head: string; socket: net.Socket }> {
  const socket = await rawConnect(proxy);
  socket.write(`CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\n\r\n`);
  return { head: await readHead(socket), socket };
}

export const statusOf = (head: string) => Number(head.split(' ')[1]);

export function curl(args: string[]): Promise<{ code: number; stdout: string }> {
  return new Promise((resolve) => {
    execFile(
      'curl',
      ['-sS', '--max-time', '20', ...args],
      { env: { PATH: process.env.PATH } },
      (err, stdout) => resolve({ code: err ? Number(err.code ?? 1) : 0, stdout }),
    );
  });
}

/** A TLS handshake through an open tunnel: the server's bytes, or the error. */
export function tlsThrough(socket: net.Socket, servername: string): Promise<string> {
  return new Promise((resolve) => {
    const t = tls.connect({ socket, servername, rejectUnauthorized: false });
    const chunks: Buffer[] = [];
    t.on('data', (d: Buffer) => chunks.push(d));
    t.on('error', (err) => resolve(`error: ${err.message}`));
    t.on('end', () => resolve(Buffer.concat(chunks).toString()));
  });
}

/** Wait for `cond` (polled every 20 ms); fails after `ms`. */
export const until = async (cond: () => boolean, ms = 5000) => {
  if (!(await pollUntil(cond, { timeoutMs: ms, intervalMs: 20 }))) {
    throw new Error('timed out waiting');
  }
};

/**
 * The origins, the echo server and the TLS server start before the file's tests and stop after
 * them; the proxies a test started stop after it.
 */
export function useEgressHarness(): void {
  beforeAll(async () => {
    originA = origin('A');
    originB = origin('B');
    echo = net.createServer({ allowHalfOpen: true }, (s) => {
      echoSockets.add(s);
      s.on('close', () => echoSockets.delete(s));
      s.on('error', () => {});
      s.on('data', (d: Buffer) => {
        echoReceived += d.length;
        s.write(d);
      });
      s.on('end', () => s.end('bye'));
    });
    [portA, portB, echoPort] = await Promise.all([listen(originA), listen(originB), listen(echo)]);
    const dead = net.createServer();
    deadPort = await listen(dead);
    await closeServer(dead);

    if (hasOpenssl) {
      certDir = mkdtempSync(join(tmpdir(), 'egress-test-'));
      execFileSync(
        'openssl',
        [
          'req',
          '-x509',
          '-newkey',
          'rsa:2048',
          '-nodes',
          '-days',
          '1',
          '-subj',
          '/CN=test',
          '-addext',
          'subjectAltName=DNS:ok.test,DNS:www.blocked.test',
          '-keyout',
          join(certDir, 'key.pem'),
          '-out',
          join(certDir, 'cert.pem'),
        ],
        { stdio: 'ignore' },
      );
      tlsServer = tls.createServer(
        {
          key: readFileSync(join(certDir, 'key.pem')),
          cert: readFileSync(join(certDir, 'cert.pem')),
        },
        (s) => {
          s.on('error', () => {});
          s.end(`HTTP/1.1 200 OK\r\nContent-Length: 9\r\nConnection: close\r\n\r\nsecure ok`);
        },
      );
      tlsServer.on('tlsClientError', () => {});
      tlsPort = await listen(tlsServer);
    } // without openssl, SNI refusals are still tested against the echo server
  });
  afterAll(async () => {
    for (const s of echoSockets) s.destroy();
    await Promise.all([originA, originB, echo].map(closeServer));
    if (tlsServer) await closeServer(tlsServer);
    if (certDir) rmSync(certDir, { recursive: true, force: true });
  });
  afterEach(async () => {
    await Promise.all(proxies.splice(0).map((p) => p.close()));
  });
}
