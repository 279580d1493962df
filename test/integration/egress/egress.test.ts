/**
 * The egress as an instance's clients meet it: `Egress` behind a listener on 127.0.0.1:0, used as
 * an HTTP proxy by Node clients, raw sockets and curl, in front of origin servers on 127.0.0.1.
 * Loopback is "the host" here, so the operator flags decide what each test may reach. Here: what
 * the host's loopback and blocked domains let through, with Node's clients and with curl; the
 * harness is egress-harness.ts, the connections themselves egress-connections.test.ts.
 */
import net, { type AddressInfo } from 'node:net';
import { networkInterfaces } from 'node:os';
import tls from 'node:tls';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import type { Logger } from '../../../src/server/instances/runtime.js';
import {
  portA,
  portB,
  echoPort,
  echoReceived,
  deadPort,
  tlsPort,
  hasCurl,
  hasOpenssl,
  startProxy,
  viaProxy,
  readAll,
  connect,
  statusOf,
  curl,
  tlsThrough,
  useEgressHarness,
} from './egress-harness.js';
useEgressHarness();

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

  it("opens an allowed port on loopback only, not on the host's other addresses", async () => {
    const proxy = await startProxy({ allowHostPorts: [portA] });
    const own = Object.values(networkInterfaces())
      .flat()
      .filter((i) => i && !i.internal && i.family === 'IPv4')
      .map((i) => i!.address);
    expect(own.length, 'this host has a non-loopback IPv4 address').toBeGreaterThan(0);
    for (const host of own) {
      const get = await viaProxy(proxy, `http://${host}:${portA}/`);
      expect(get.status, host).toBe(403);
      expect(get.body).toMatch(/^burrow egress: host_local: .*opened on loopback only/);
      const { head, socket } = await connect(proxy, `${host}:${portA}`);
      expect(statusOf(head), host).toBe(403);
      socket.destroy();
    }
    expect((await viaProxy(proxy, `http://127.0.0.1:${portA}/`)).status).toBe(200);
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
      await sleep(5);
    }
    expect(Buffer.from(await answer)).toEqual(Buffer.from([0x15, 3, 3, 0, 2, 2, 49]));
    expect(echoReceived).toBe(before);
  });

  it('closes a tunnel whose ClientHello never completes, where domains are blocked', async () => {
    const proxy = await startProxy(
      { blockedDomains, allowHostPorts: [echoPort] },
      { helloTimeoutMs: 200 },
    );
    const { socket } = await connect(proxy, `127.0.0.1:${echoPort}`);
    const answer = readAll(socket);
    socket.write(Buffer.from([0x16, 3, 1, 1, 0, 1]));
    expect(Buffer.from(await answer)[0]).toBe(0x15);
  });

  it('with no domain blocked, reads nothing of a tunnel: a partial hello passes at once', async () => {
    const proxy = await startProxy({ allowHostPorts: [echoPort] }, { helloTimeoutMs: 200 });
    const { socket } = await connect(proxy, `127.0.0.1:${echoPort}`);
    const all = readAll(socket);
    socket.end(Buffer.from([0x16, 3, 1, 1, 0, 1]));
    expect(Buffer.from(await all, 'latin1').subarray(0, 6)).toEqual(
      Buffer.from([0x16, 3, 1, 1, 0, 1]),
    );
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
