/**
 * The address model and the tunnel's `Host` rule as a client of the egress meets them (issue 35,
 * item 1): `Egress` behind a listener on 127.0.0.1:0, origins on 127.0.0.1. Each case here let the
 * request through before the fix:
 * - the cluster's endpoints were compared by equality, so `0.0.0.0:PORT` and `0:PORT` reached a
 *   database refused as `127.0.0.1:PORT` where the operator allowed host loopback;
 * - a private address was reached without any switch allowing it;
 * - plain HTTP inside a `CONNECT` tunnel to an allowed address reached the upstream with a
 *   blocked `Host`, in the first request and in a later one on the same tunnel.
 */
import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Logger } from '../../../src/server/instances/runtime.js';
import { Egress, type EgressPolicy } from '../../../src/server/sandbox/egress/egress.js';

const quiet: Logger = { info() {}, warn() {}, error() {}, debug() {} };

let origin: http.Server;
let originPort: number;
/** Requests the origin received, by Host. */
const received: string[] = [];
const closers: (() => void)[] = [];

beforeAll(async () => {
  origin = http.createServer((req, res) => {
    received.push(req.headers.host ?? '');
    res.end(`origin saw ${req.headers.host}`);
  });
  await new Promise<void>((r) => origin.listen(0, '127.0.0.1', r));
  originPort = (origin.address() as AddressInfo).port;
});
afterAll(() => {
  origin.closeAllConnections();
  origin.close();
});
afterEach(() => {
  for (const close of closers.splice(0)) close();
  received.length = 0;
});

async function startProxy(policy: Partial<EgressPolicy>): Promise<number> {
  const egress = new Egress(
    {
      blockedDomains: [],
      allowHostLoopback: false,
      allowHostPorts: [],
      protectedPorts: () => [],
      ...policy,
    },
    quiet,
  );
  const sockets = new Set<net.Socket>();
  const listener = net.createServer({ allowHalfOpen: true }, (s) => {
    sockets.add(s);
    egress.handle(s);
  });
  await new Promise<void>((r) => listener.listen(0, '127.0.0.1', r));
  closers.push(() => {
    egress.close();
    for (const s of sockets) s.destroy();
    listener.close();
  });
  return (listener.address() as AddressInfo).port;
}

/** Open a socket to the proxy and read what it answers to `text` until `until` matches or close. */
function exchange(port: number): {
  send: (text: string) => void;
  read: (until: RegExp) => Promise<string>;
  socket: net.Socket;
} {
  const socket = net.connect(port, '127.0.0.1');
  let got = '';
  const waiters: (() => void)[] = [];
  socket.on('data', (d: Buffer) => {
    got += d.toString('latin1');
    for (const w of waiters.splice(0)) w();
  });
  socket.on('close', () => {
    for (const w of waiters.splice(0)) w();
  });
  socket.on('error', () => {});
  closers.push(() => socket.destroy());
  return {
    socket,
    send: (text) => socket.write(text),
    read: async (until) => {
      while (!until.test(got) && !socket.destroyed) {
        await new Promise<void>((r) => waiters.push(r));
      }
      const out = got;
      got = '';
      return out;
    },
  };
}

/** A plain GET through the proxy: the status and the body. */
async function get(port: number, url: string): Promise<{ status: number; body: string }> {
  const c = exchange(port);
  c.send(`GET ${url} HTTP/1.1\r\nHost: ${new URL(url).host}\r\nConnection: close\r\n\r\n`);
  const text = await c.read(/(?!)/); // until it closes
  return { status: Number(text.split(' ')[1]), body: text.slice(text.indexOf('\r\n\r\n') + 4) };
}

/** The status line's code of a CONNECT to `target`. */
async function connectStatus(port: number, target: string): Promise<number> {
  const c = exchange(port);
  c.send(`CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\n\r\n`);
  const head = await c.read(/\r\n\r\n/);
  c.socket.destroy();
  return Number(head.split(' ')[1]);
}

describe("the cluster's endpoints on this host, in every spelling", () => {
  it('are refused on 0.0.0.0, 0, :: and numeric spellings where host loopback is open', async () => {
    const proxy = await startProxy({
      allowHostLoopback: true,
      // the origin stands for the cluster's database, refused as 127.0.0.1:PORT
      refusedEndpoints: () => [{ address: '127.0.0.1', port: originPort }],
    });
    for (const host of ['127.0.0.1', '0.0.0.0', '0', '[::]', '2130706433', '127.1', '0x7f.1']) {
      const r = await get(proxy, `http://${host}:${originPort}/`);
      expect(r.status, host).toBe(403);
      expect(r.body, host).toMatch(/^burrow egress: cluster_endpoint: /);
      expect(await connectStatus(proxy, `${host}:${originPort}`), host).toBe(403);
    }
    expect(received).toEqual([]);
  });

  it('leave other ports of this host as the operator opened them', async () => {
    const other = http.createServer((_q, s) => s.end('other'));
    await new Promise<void>((r) => other.listen(0, '127.0.0.1', r));
    closers.push(() => other.close());
    const port = (other.address() as AddressInfo).port;
    const proxy = await startProxy({
      allowHostLoopback: true,
      refusedEndpoints: () => [{ address: '127.0.0.1', port: originPort }],
    });
    for (const host of ['0.0.0.0', '0']) {
      expect(await get(proxy, `http://${host}:${port}/`), host).toEqual({
        status: 200,
        body: 'other',
      });
    }
  });
});

describe('private networks', () => {
  it('are refused by default, in every spelling, and by CONNECT', async () => {
    const proxy = await startProxy({ allowHostLoopback: true });
    for (const host of ['10.255.255.1', '10.16776961', '0xaffff01', '[::ffff:10.255.255.1]']) {
      const r = await get(proxy, `http://${host}:81/`);
      expect(r.status, host).toBe(403);
      expect(r.body, host).toMatch(/^burrow egress: private_network: .*--allow-network/);
      expect(await connectStatus(proxy, `${host}:81`), host).toBe(403);
    }
    for (const host of ['192.168.0.1', '172.16.0.1', '100.64.0.1', '[fd00::1]']) {
      expect((await get(proxy, `http://${host}:81/`)).status, host).toBe(403);
    }
  });

  it('are tried where the operator allowed them (no 403)', async () => {
    const proxy = await startProxy({ allowNetworks: ['10.255.255.0/24'] });
    // nothing answers there: the egress tried to connect (a gateway error, not the policy's 403)
    const r = await get(proxy, 'http://10.255.255.1:81/');
    expect(r.status).not.toBe(403);
    expect(r.body).not.toMatch(/private_network/);
    expect((await get(proxy, 'http://10.255.254.1:81/')).status).toBe(403);
  }, 40_000);
});

describe('plain HTTP inside a CONNECT tunnel', () => {
  const blockedDomains = ['blocked.test'];

  it('is held to the Host rule in its first request', async () => {
    const proxy = await startProxy({ blockedDomains, allowHostLoopback: true });
    const c = exchange(proxy);
    c.send(`CONNECT 127.0.0.1:${originPort} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`);
    expect(await c.read(/\r\n\r\n/)).toMatch(/^HTTP\/1\.1 200/);
    c.send('GET / HTTP/1.1\r\nHost: www.blocked.test\r\n\r\n');
    const answer = await c.read(/(?!)/);
    expect(answer).toMatch(/^HTTP\/1\.1 403/);
    expect(answer).toContain('burrow egress: blocked_domain: www.blocked.test');
    expect(received).toEqual([]);
  });

  it('and in every later request of the tunnel', async () => {
    const proxy = await startProxy({ blockedDomains, allowHostLoopback: true });
    const c = exchange(proxy);
    c.send(`CONNECT 127.0.0.1:${originPort} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`);
    expect(await c.read(/\r\n\r\n/)).toMatch(/^HTTP\/1\.1 200/);
    c.send('GET / HTTP/1.1\r\nHost: fine.test\r\n\r\n');
    expect(await c.read(/origin saw fine\.test/)).toMatch(/^HTTP\/1\.1 200/);
    c.send('GET /2 HTTP/1.1\r\nHost: blocked.test:80\r\n\r\n');
    expect(await c.read(/(?!)/)).toContain('403');
    expect(received).toEqual(['fine.test']);
  });
});
