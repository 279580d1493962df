/**
 * The egress as an instance's clients meet it: `Egress` behind a listener on 127.0.0.1:0, used as
 * an HTTP proxy by Node clients, raw sockets and curl, in front of origin servers on 127.0.0.1.
 * Loopback is "the host" here, so the operator flags decide what each test may reach.
 */
import { execFile, execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import tls from 'node:tls';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Logger } from '../../../src/server/instances/runtime.js';
import {
  Egress,
  type EgressOptions,
  type EgressPolicy,
} from '../../../src/server/sandbox/egress/egress.js';

const quiet: Logger = { info() {}, warn() {}, error() {}, debug() {} };

/** Sockets each test server accepted, destroyed when it closes. */
const accepted = new WeakMap<net.Server, Set<net.Socket>>();
const listen = async <T extends net.Server>(server: T): Promise<number> => {
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
const closeServer = (server: net.Server) =>
  new Promise<void>((resolve) => {
    server.close(() => resolve());
    for (const s of accepted.get(server) ?? []) s.destroy();
  });

/** An origin that names itself and echoes what it was asked. */
function origin(name: string): http.Server {
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

let originA: http.Server;
let originB: http.Server;
let portA: number;
let portB: number;
/** Raw TCP: echoes, answers "bye" after the client half-closes, counts the bytes it received. */
let echo: net.Server;
let echoPort: number;
let echoReceived = 0;
const echoSockets = new Set<net.Socket>();
/** A closed port: something listened there a moment ago. */
let deadPort: number;
/** HTTPS with a self-signed cert for `ok.test`, when openssl exists. */
let tlsServer: tls.Server | undefined;
let tlsPort = 0;
let certDir: string | undefined;
const has = (cmd: string, arg: string) => {
  try {
    execFileSync(cmd, [arg], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
};
const hasCurl = has('curl', '--version');
const hasOpenssl = has('openssl', 'version');

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

interface Proxy {
  port: number;
  egress: Egress;
  /** Client connections the listener accepted. */
  accepted: number;
  close(): Promise<void>;
}
const proxies: Proxy[] = [];
afterEach(async () => {
  await Promise.all(proxies.splice(0).map((p) => p.close()));
});

async function startProxy(
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

interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}

/** An absolute-form request through the proxy. */
function viaProxy(
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
function readHead(socket: net.Socket): Promise<string> {
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
function readAll(socket: net.Socket, ms = 10_000): Promise<string> {
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

function rawConnect(proxy: Proxy): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const s = net.connect(proxy.port, '127.0.0.1', () => resolve(s));
    s.on('error', reject);
  });
}

/** `CONNECT target` and its answer's head; on 200 the socket is the tunnel. */
async function connect(
  proxy: Proxy,
  target: string,
): Promise<{ head: string; socket: net.Socket }> {
  const socket = await rawConnect(proxy);
  socket.write(`CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\n\r\n`);
  return { head: await readHead(socket), socket };
}

const statusOf = (head: string) => Number(head.split(' ')[1]);

function curl(args: string[]): Promise<{ code: number; stdout: string }> {
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
function tlsThrough(socket: net.Socket, servername: string): Promise<string> {
  return new Promise((resolve) => {
    const t = tls.connect({ socket, servername, rejectUnauthorized: false });
    const chunks: Buffer[] = [];
    t.on('data', (d: Buffer) => chunks.push(d));
    t.on('error', (err) => resolve(`error: ${err.message}`));
    t.on('end', () => resolve(Buffer.concat(chunks).toString()));
  });
}

const until = async (cond: () => boolean, ms = 5000) => {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error('timed out waiting');
    await new Promise((r) => setTimeout(r, 20));
  }
};

describe('host loopback', () => {
  it('reaches an allowed port by CONNECT and by absolute-form GET', async () => {
    const proxy = await startProxy({ allowHostPorts: [portA, echoPort] });
    const get = await viaProxy(proxy, `http://127.0.0.1:${portA}/path?q=1`, {
      headers: { 'Proxy-Authorization': 'Basic c2VjcmV0', 'Proxy-Connection': 'keep-alive' },
    });
    expect(get.status).toBe(200);
    expect(JSON.parse(get.body)).toMatchObject({
      name: 'A',
      url: '/path?q=1',
      host: `127.0.0.1:${portA}`,
      proxyAuth: null,
    });

    const { head, socket } = await connect(proxy, `127.0.0.1:${echoPort}`);
    expect(statusOf(head)).toBe(200);
    socket.resume();
    const back = new Promise<string>((resolve) => socket.once('data', (d) => resolve(String(d))));
    socket.write('ping');
    expect(await back).toBe('ping');
    socket.destroy();
  });

  it('reaches `localhost` and IPv6 literals (tries each checked address)', async () => {
    const proxy = await startProxy({ allowHostPorts: [portA] });
    const byName = await viaProxy(proxy, `http://localhost:${portA}/`);
    expect(byName.status).toBe(200);
    expect(JSON.parse(byName.body)).toMatchObject({ name: 'A', host: `localhost:${portA}` });
    // Nothing listens on ::1 here: refused by the origin's absence, not by the policy.
    const v6 = await viaProxy(proxy, `http://[::1]:${portA}/`);
    expect(v6.status).toBe(502);
    expect(v6.headers['x-burrow-egress']).toBe('upstream_failed');
  });

  it('refuses a port that is not allowed, in every spelling of the host', async () => {
    const proxy = await startProxy({ allowHostPorts: [portA] });
    for (const host of ['127.0.0.1', 'localhost', '127.1', '0.0.0.0', '[::ffff:127.0.0.1]']) {
      const get = await viaProxy(proxy, `http://${host}:${portB}/`);
      expect(get.status, host).toBe(403);
      expect(get.body).toMatch(/^burrow egress: host_local: /);
      const { head, socket } = await connect(proxy, `${host}:${portB}`);
      expect(statusOf(head), host).toBe(403);
      socket.destroy();
    }
  });

  it('allows every port with allowHostLoopback, never a protected one', async () => {
    let protectedPorts = [portA];
    const proxy = await startProxy({
      allowHostLoopback: true,
      protectedPorts: () => protectedPorts,
    });
    expect((await viaProxy(proxy, `http://127.0.0.1:${portB}/`)).status).toBe(200);
    const get = await viaProxy(proxy, `http://127.0.0.1:${portA}/`);
    expect(get.status).toBe(403);
    expect(get.headers['x-burrow-egress']).toBe('protected_port');
    const { head, socket } = await connect(proxy, `localhost:${portA}`);
    expect(statusOf(head)).toBe(403);
    expect(head).toContain('X-Burrow-Egress: protected_port');
    socket.destroy();
    // Read at each connection.
    protectedPorts = [portB];
    expect((await viaProxy(proxy, `http://127.0.0.1:${portA}/`)).status).toBe(200);
    expect((await viaProxy(proxy, `http://127.0.0.1:${portB}/`)).status).toBe(403);
  });

  it('never reaches link-local addresses (cloud metadata)', async () => {
    const proxy = await startProxy({ allowHostLoopback: true, allowHostPorts: [80] });
    const get = await viaProxy(proxy, 'http://169.254.169.254/latest/meta-data/');
    expect(get.status).toBe(403);
    expect(get.headers['x-burrow-egress']).toBe('link_local');
  });

  it('answers 502 when the allowed port has nobody listening', async () => {
    const proxy = await startProxy({ allowHostPorts: [deadPort] });
    const { head } = await connect(proxy, `127.0.0.1:${deadPort}`);
    expect(statusOf(head)).toBe(502);
    expect(head).toContain('X-Burrow-Egress: connect_failed');
  });
});

describe('blocked domains', () => {
  const blockedDomains = ['blocked.test'];

  it('refuses by CONNECT target, before any lookup', async () => {
    const proxy = await startProxy({ blockedDomains, allowHostLoopback: true });
    for (const target of ['blocked.test:443', 'WWW.Blocked.Test.:443']) {
      const { head, socket } = await connect(proxy, target);
      expect(statusOf(head), target).toBe(403);
      expect(head).toContain('X-Burrow-Egress: blocked_domain');
      socket.destroy();
    }
  });

  it('refuses by absolute URI host and by Host header', async () => {
    const proxy = await startProxy({ blockedDomains, allowHostLoopback: true });
    const byUri = await viaProxy(proxy, 'http://a.blocked.test/');
    expect(byUri.status).toBe(403);
    expect(byUri.body).toMatch(/blocked_domain: a\.blocked\.test is blocked/);
    const byHost = await viaProxy(proxy, `http://127.0.0.1:${portA}/`, {
      headers: { Host: 'blocked.test' },
    });
    expect(byHost.status).toBe(403);
    expect(byHost.headers['x-burrow-egress']).toBe('blocked_domain');
    const fine = await viaProxy(proxy, `http://127.0.0.1:${portA}/`, {
      headers: { Host: 'notblocked.test' },
    });
    expect(fine.status).toBe(200);
    expect(JSON.parse(fine.body)).toMatchObject({ host: 'notblocked.test' });
  });

  it('closes a tunnel whose TLS ClientHello names a blocked domain, forwarding nothing', async () => {
    const proxy = await startProxy({ blockedDomains, allowHostPorts: [echoPort] });
    const before = echoReceived;
    const { head, socket } = await connect(proxy, `127.0.0.1:${echoPort}`);
    expect(statusOf(head)).toBe(200);
    const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
    const result = await tlsThrough(socket, 'www.blocked.test');
    expect(result).toMatch(/^error: .*alert access denied/);
    await closed;
    expect(echoReceived).toBe(before);
  });

  it('refuses a ClientHello that arrives in pieces', async () => {
    const proxy = await startProxy({ blockedDomains, allowHostPorts: [echoPort] });
    const hello = await new Promise<Buffer>((resolve) => {
      const server = net.createServer((s) => {
        s.once('data', (d: Buffer) => {
          resolve(d);
          s.destroy();
          server.close();
        });
      });
      server.listen(0, '127.0.0.1', () => {
        const t = tls.connect({
          port: (server.address() as AddressInfo).port,
          host: '127.0.0.1',
          servername: 'blocked.test',
        });
        t.on('error', () => {});
      });
    });
    const before = echoReceived;
    const { head, socket } = await connect(proxy, `127.0.0.1:${echoPort}`);
    expect(statusOf(head)).toBe(200);
    const answer = readAll(socket);
    for (let i = 0; i < hello.length; i += 50) {
      socket.write(hello.subarray(i, i + 50));
      await new Promise((r) => setTimeout(r, 5));
    }
    expect(Buffer.from(await answer)).toEqual(Buffer.from([0x15, 3, 3, 0, 2, 2, 49]));
    expect(echoReceived).toBe(before);
  });

  it('closes a tunnel whose ClientHello never completes', async () => {
    const proxy = await startProxy({ allowHostPorts: [echoPort] }, { helloTimeoutMs: 200 });
    const { socket } = await connect(proxy, `127.0.0.1:${echoPort}`);
    const answer = readAll(socket);
    socket.write(Buffer.from([0x16, 3, 1, 1, 0, 1]));
    expect(Buffer.from(await answer)[0]).toBe(0x15);
  });

  it.skipIf(!hasOpenssl)('lets a ClientHello naming an allowed host through', async () => {
    const proxy = await startProxy({ blockedDomains, allowHostPorts: [tlsPort] });
    const { head, socket } = await connect(proxy, `127.0.0.1:${tlsPort}`);
    expect(statusOf(head)).toBe(200);
    expect(await tlsThrough(socket, 'ok.test')).toMatch(/secure ok$/);
  });

  it('passes non-TLS bytes through a tunnel, half-close included', async () => {
    const proxy = await startProxy({ blockedDomains, allowHostPorts: [echoPort] });
    const { socket } = await connect(proxy, `127.0.0.1:${echoPort}`);
    const all = readAll(socket);
    socket.end('plain bytes');
    expect(await all).toBe('plain bytesbye');
  });
});

describe.skipIf(!hasCurl)('curl as the client', () => {
  it('GETs through the proxy, plain and tunnelled, and sees refusals', async () => {
    const logged: unknown[] = [];
    const keep = (obj: unknown, msg?: string) => logged.push([obj, msg]);
    const log: Logger = { info: keep, warn: keep, error: keep, debug: keep };
    const proxy = await startProxy({ allowHostPorts: [portA] }, {}, log);
    const proxyUrl = `http://127.0.0.1:${proxy.port}`;
    const plain = await curl(['--proxy', proxyUrl, `http://127.0.0.1:${portA}/x?secret=1`]);
    expect(plain.code).toBe(0);
    expect(JSON.parse(plain.stdout)).toMatchObject({ name: 'A', url: '/x?secret=1' });
    const tunnelled = await curl(['-p', '--proxy', proxyUrl, `http://localhost:${portA}/t`]);
    expect(tunnelled.code).toBe(0);
    expect(JSON.parse(tunnelled.stdout)).toMatchObject({ name: 'A', url: '/t' });
    const refused = await curl(['--proxy', proxyUrl, `http://127.0.0.1:${portB}/`]);
    expect(refused.stdout).toMatch(/^burrow egress: host_local/);
    // Decisions are logged by host:port; paths and queries never.
    const text = JSON.stringify(logged);
    expect(text).toContain(`127.0.0.1:${portA}`);
    expect(text).toContain('host_local');
    expect(text).not.toMatch(/secret|\/x|\/t\b/);
  });

  it.skipIf(!hasOpenssl)('is stopped by SNI when it fronts a blocked name', async () => {
    const proxy = await startProxy({ blockedDomains: ['blocked.test'], allowHostPorts: [tlsPort] });
    const proxyUrl = `http://127.0.0.1:${proxy.port}`;
    const ok = await curl(['-k', '--proxy', proxyUrl, `https://127.0.0.1:${tlsPort}/`]);
    expect(ok).toMatchObject({ code: 0, stdout: 'secure ok' });
    // --connect-to: CONNECT to the allowed literal address, TLS names the blocked host.
    const fronted = await curl([
      '-k',
      '--proxy',
      proxyUrl,
      '--connect-to',
      `www.blocked.test:443:127.0.0.1:${tlsPort}`,
      'https://www.blocked.test/',
    ]);
    expect(fronted.code).not.toBe(0);
    expect(fronted.stdout).toBe('');
  });
});

describe('connections', () => {
  it('serves several targets on one keep-alive connection', async () => {
    const proxy = await startProxy({ allowHostLoopback: true });
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    try {
      const a = await viaProxy(proxy, `http://127.0.0.1:${portA}/one`, { agent });
      const b = await viaProxy(proxy, `http://localhost:${portB}/two`, {
        agent,
        method: 'POST',
        body: 'x'.repeat(100_000),
      });
      const a2 = await viaProxy(proxy, `http://127.0.0.1:${portA}/three`, { agent });
      expect(JSON.parse(a.body)).toMatchObject({ name: 'A', url: '/one' });
      expect(JSON.parse(b.body)).toMatchObject({ name: 'B', url: '/two', method: 'POST' });
      expect(JSON.parse(b.body).body).toHaveLength(100_000);
      expect(JSON.parse(a2.body)).toMatchObject({ name: 'A', url: '/three' });
      expect([a.reused, b.reused, a2.reused]).toEqual([false, true, true]);
      expect(proxy.accepted).toBe(1);
    } finally {
      agent.destroy();
    }
  });

  it('relays an absolute-form WebSocket upgrade', async () => {
    const ws = http.createServer();
    ws.on('upgrade', (req, socket) => {
      socket.write(
        'HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n',
      );
      socket.on('data', (d: Buffer) => socket.write(`echo:${d.toString()}`));
      socket.on('end', () => socket.end());
      socket.on('error', () => {});
    });
    const wsPort = await listen(ws);
    try {
      const proxy = await startProxy({ allowHostPorts: [wsPort] });
      const socket = await rawConnect(proxy);
      socket.write(
        `GET http://127.0.0.1:${wsPort}/chat HTTP/1.1\r\nHost: 127.0.0.1:${wsPort}\r\n` +
          'Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n' +
          'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n',
      );
      const head = await readHead(socket);
      expect(head).toMatch(/^HTTP\/1\.1 101 /);
      expect(head).toContain('Upgrade: websocket');
      socket.resume();
      const back = new Promise<string>((resolve) => socket.once('data', (d) => resolve(String(d))));
      socket.write('frame');
      expect(await back).toBe('echo:frame');
      socket.destroy();
    } finally {
      await closeServer(ws);
    }
  });

  it('close() ends open tunnels and refuses new connections', async () => {
    const proxy = await startProxy({ allowHostPorts: [echoPort] });
    const { socket } = await connect(proxy, `127.0.0.1:${echoPort}`);
    socket.write('x');
    await until(() => echoSockets.size > 0);
    const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
    proxy.egress.close();
    await closed;
    await until(() => echoSockets.size === 0);
    const late = await rawConnect(proxy);
    expect(await readAll(late)).toBe('');
  });

  it('keeps a quiet request in flight past the idle timeout', async () => {
    const proxy = await startProxy({ allowHostPorts: [portA] }, { idleTimeoutMs: 200 });
    const slow = await viaProxy(proxy, `http://127.0.0.1:${portA}/slow`);
    expect(slow).toMatchObject({ status: 200, body: 'slow done' });
  });

  it('answers 503 beyond maxConnections', async () => {
    const proxy = await startProxy({}, { maxConnections: 2 });
    const held = [await rawConnect(proxy), await rawConnect(proxy)];
    await until(() => proxy.accepted === 2);
    expect(await readAll(await rawConnect(proxy))).toMatch(/^HTTP\/1\.1 503 [^]*busy/);
    for (const s of held) s.destroy();
  });

  it('closes idle client connections', async () => {
    const proxy = await startProxy({}, { idleTimeoutMs: 200 });
    const socket = await rawConnect(proxy);
    const started = Date.now();
    await readAll(socket);
    expect(Date.now() - started).toBeLessThan(3000);
  });
});

describe('malformed input', () => {
  it('answers 400 to origin-form and garbage, 431 to huge heads', async () => {
    const proxy = await startProxy({ allowHostLoopback: true });
    const send = async (bytes: string | Buffer) => {
      const s = await rawConnect(proxy);
      const all = readAll(s);
      s.write(bytes);
      return all;
    };
    expect(await send('GET / HTTP/1.1\r\nHost: x\r\n\r\n')).toMatch(
      /^HTTP\/1\.1 400 [^]*origin_form/,
    );
    expect(await send('GET https://a.test/ HTTP/1.1\r\n\r\n')).toMatch(/^HTTP\/1\.1 400 /);
    expect(await send('CONNECT nonsense HTTP/1.1\r\n\r\n')).toMatch(/^HTTP\/1\.1 400 /);
    expect(await send('\x00\x01\x02garbage\r\n\r\n')).toMatch(/^HTTP\/1\.1 400 /);
    expect(
      await send(`GET http://127.0.0.1:${portA}/ HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n`),
    ).toMatch(/^HTTP\/1\.1 400 [^]*more than one Host/);
    expect(
      await send(`GET http://127.0.0.1:${portA}/ HTTP/1.1\r\nX: ${'y'.repeat(40_000)}\r\n\r\n`),
    ).toMatch(/^HTTP\/1\.1 431 /);
  });

  it('survives fuzzing, half-open and reset sockets, and still serves', async () => {
    const proxy = await startProxy({ allowHostLoopback: true }, { idleTimeoutMs: 500 });
    const seeds = [
      `GET http://127.0.0.1:${portA}/ HTTP/1.1\r\nHost: a\r\n\r\n`,
      `CONNECT 127.0.0.1:${echoPort} HTTP/1.1\r\n\r\n`,
      'POST http://127.0.0.1:1/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n',
    ];
    const runs: Promise<unknown>[] = [];
    for (let i = 0; i < 60; i++) {
      runs.push(
        (async () => {
          const s = await rawConnect(proxy);
          const done = readAll(s, 1000); // a tunnel that opened stays open: cut it
          const seed = Buffer.from(seeds[i % seeds.length]!);
          for (let f = 0; f < 1 + (i % 5); f++) {
            seed[Math.floor(Math.random() * seed.length)] = Math.floor(Math.random() * 256);
          }
          if (i % 4 === 0) s.write(seed.subarray(0, Math.floor(seed.length / 2)));
          else s.write(seed);
          if (i % 7 === 0) s.resetAndDestroy();
          else if (i % 3 === 0) s.end(); // half-open
          return done;
        })(),
      );
    }
    await Promise.all(runs);
    const get = await viaProxy(proxy, `http://127.0.0.1:${portA}/after`);
    expect(JSON.parse(get.body)).toMatchObject({ name: 'A', url: '/after' });
  });
});
