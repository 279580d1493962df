/**
 * Request framing through the egress: a body is forwarded only with the framing its head was
 * strictly read with, so the bytes after one request never reach the upstream as another
 * (request smuggling past the Host rule). `requestFraming` alone, then the real `Egress` fed raw
 * bytes on loopback sockets, in front of a Node HTTP origin that counts the requests it parses.
 */
import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { Logger } from '../../src/server/instances/runtime.js';
import { Egress } from '../../src/server/sandbox/egress/egress.js';
import { requestFraming } from '../../src/server/sandbox/egress/proxy-http.js';

describe('requestFraming', () => {
  const h = (...kv: string[]) => kv;

  it('reads no body, a length or chunked', () => {
    expect(requestFraming('1.1', h('Host', 'a'))).toEqual({ kind: 'none' });
    expect(requestFraming('1.1', h('Content-Length', '0'))).toEqual({ kind: 'none' });
    expect(requestFraming('1.1', h('Content-Length', '12'))).toEqual({
      kind: 'length',
      length: 12,
    });
    expect(requestFraming('1.1', h('Transfer-Encoding', 'chunked'))).toEqual({ kind: 'chunked' });
    expect(requestFraming('1.1', h('transfer-encoding', 'gzip, Chunked'))).toEqual({
      kind: 'chunked',
    });
  });

  it('refuses ambiguous or malformed framing', () => {
    const cases: [string, string[]][] = [
      ['1.1', h('Content-Length', '4', 'Transfer-Encoding', 'chunked')],
      ['1.1', h('Transfer-Encoding', 'chunked', 'Content-Length', '4')],
      ['1.0', h('Transfer-Encoding', 'chunked')],
      ['1.1', h('Transfer-Encoding', 'chunked, gzip')],
      ['1.1', h('Transfer-Encoding', 'chunked', 'Transfer-Encoding', 'chunked')],
      ['1.1', h('Transfer-Encoding', 'xchunked')],
      ['1.1', h('Transfer-Encoding', '')],
      ['1.1', h('Content-Length', '4', 'Content-Length', '4')],
      ['1.1', h('Content-Length', '4, 4')],
      ['1.1', h('Content-Length', '-1')],
      ['1.1', h('Content-Length', '')],
      ['1.1', h('Content-Length', '0x10')],
      ['1.1', h('X-A', 'a\r\n b')],
      ['1.1', h('X-A', 'a\nb')],
      ['1.1', h('X-A', 'a\rb')],
      ['1.1', h('X-A', 'a\u0000b')],
      ['1.1', h('Transfer-Encoding ', 'chunked')],
      ['1.1', h('X A', 'b')],
      ['1.1', h('', 'b')],
    ];
    for (const [version, raw] of cases) {
      expect(requestFraming(version, raw), JSON.stringify(raw)).toHaveProperty('refused');
    }
  });
});

describe('the egress forwards one well-framed request at a time', () => {
  const quiet: Logger = { info() {}, warn() {}, error() {}, debug() {} };
  /** What the origin parsed: one entry per request, with its Host and body. */
  const seen: { method: string; host: string | undefined; body: string }[] = [];
  const origin = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      seen.push({
        method: req.method ?? '',
        host: req.headers.host,
        body: Buffer.concat(chunks).toString(),
      });
      res.end('ok');
    });
  });
  const egress = new Egress(
    {
      blockedDomains: ['blocked.test'],
      allowHostLoopback: true,
      allowHostPorts: [],
      protectedPorts: () => [],
    },
    quiet,
  );
  const listener = net.createServer((s) => egress.handle(s));
  let originPort = 0;
  let proxyPort = 0;

  beforeAll(async () => {
    await new Promise<void>((r) => origin.listen(0, '127.0.0.1', r));
    await new Promise<void>((r) => listener.listen(0, '127.0.0.1', r));
    originPort = (origin.address() as AddressInfo).port;
    proxyPort = (listener.address() as AddressInfo).port;
  });
  afterAll(async () => {
    egress.close();
    origin.closeAllConnections();
    await new Promise((r) => origin.close(r));
    await new Promise((r) => listener.close(r));
  });
  beforeEach(() => {
    seen.length = 0;
  });

  /** Sends `raw` and collects the answer until the proxy closes or `ms` of silence. */
  const send = (raw: string, ms = 500) =>
    new Promise<string>((resolve) => {
      const c = net.connect(proxyPort, '127.0.0.1');
      let got = '';
      let timer = setTimeout(() => c.destroy(), ms);
      c.on('data', (d: Buffer) => {
        got += d.toString('latin1');
        clearTimeout(timer);
        timer = setTimeout(() => c.destroy(), ms);
      });
      c.on('error', () => {});
      c.on('close', () => resolve(got));
      c.write(raw);
    });

  const smuggled = 'GET http://blocked.test/ HTTP/1.1\r\nHost: blocked.test\r\n\r\n';
  const target = () => `http://127.0.0.1:${originPort}/`;
  const hostLine = () => `Host: 127.0.0.1:${originPort}\r\n`;
  const chunk = (s: string) => `${Buffer.byteLength(s).toString(16)}\r\n${s}\r\n`;

  it('keeps a chunked GET body chunked: the origin parses one request', async () => {
    const answer = await send(
      `GET ${target()} HTTP/1.1\r\n${hostLine()}Transfer-Encoding: chunked\r\n\r\n` +
        `${chunk(smuggled)}0\r\n\r\n`,
    );
    expect(answer).toMatch(/^HTTP\/1\.1 200 /);
    expect(seen).toEqual([{ method: 'GET', host: `127.0.0.1:${originPort}`, body: smuggled }]);
  });

  it('keeps chunked framing on HEAD, DELETE and OPTIONS too', async () => {
    for (const method of ['HEAD', 'DELETE', 'OPTIONS']) {
      seen.length = 0;
      await send(
        `${method} ${target()} HTTP/1.1\r\n${hostLine()}Transfer-Encoding: chunked\r\n\r\n` +
          `${chunk(smuggled)}0\r\n\r\n`,
      );
      expect(
        seen.map((r) => r.host),
        method,
      ).toEqual([`127.0.0.1:${originPort}`]);
    }
  });

  it('checks each pipelined request against the policy', async () => {
    const answer = await send(
      `GET ${target()} HTTP/1.1\r\n${hostLine()}Content-Length: 0\r\n\r\n` +
        `GET ${target()} HTTP/1.1\r\nHost: blocked.test\r\n\r\n`,
    );
    expect(answer).toMatch(/^HTTP\/1\.1 200 /);
    expect(answer).toContain('403 Forbidden');
    expect(seen.map((r) => r.host)).toEqual([`127.0.0.1:${originPort}`]);
  });

  it('refuses ambiguous framing with a 400 before anything reaches the origin', async () => {
    const heads = [
      'Content-Length: 4\r\nTransfer-Encoding: chunked\r\n',
      'Transfer-Encoding: chunked\r\nContent-Length: 4\r\n',
      'Content-Length: 4\r\nContent-Length: 5\r\n',
      'Transfer-Encoding: chunked, gzip\r\n',
      'Transfer-Encoding : chunked\r\n',
      'X-A: a\r\n b\r\n',
      'X-A: a\rb\r\n',
    ];
    for (const head of heads) {
      const answer = await send(`POST ${target()} HTTP/1.1\r\n${hostLine()}${head}\r\n0\r\n\r\n`);
      expect(answer, JSON.stringify(head)).toMatch(/^HTTP\/1\.1 400 /);
    }
    const http10 = await send(
      `POST ${target()} HTTP/1.0\r\n${hostLine()}Transfer-Encoding: chunked\r\n\r\n` +
        `${chunk(smuggled)}0\r\n\r\n`,
    );
    expect(http10).toMatch(/^HTTP\/1\.1 400 /);
    const bareLf = await send(`GET ${target()} HTTP/1.1\n${hostLine()}\n${smuggled}`);
    expect(bareLf).toMatch(/^HTTP\/1\.1 400 /);
    expect(seen).toEqual([]);
  });

  it('refuses an upgrade that carries a body', async () => {
    const answer = await send(
      `GET ${target()} HTTP/1.1\r\n${hostLine()}Connection: Upgrade\r\nUpgrade: websocket\r\n` +
        `Content-Length: ${smuggled.length}\r\n\r\n${smuggled}`,
    );
    expect(answer).toMatch(/^HTTP\/1\.1 400 /);
    expect(seen).toEqual([]);
  });
});
