/**
 * The egress's connections, through `Egress` behind a listener on 127.0.0.1:0 in front of origin
 * servers on 127.0.0.1 (egress-harness.ts): keep-alive, tunnels and how they end, and input that
 * is not a well-formed request.
 */
import http from 'node:http';
import { describe, expect, it } from 'vitest';
import {
  listen,
  closeServer,
  portA,
  portB,
  echoPort,
  echoSockets,
  startProxy,
  viaProxy,
  readHead,
  readAll,
  rawConnect,
  connect,
  until,
  useEgressHarness,
} from './egress-harness.js';
useEgressHarness();

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
