/**
 * The HTTP face under abuse, against the real server over real sockets (raw `net` where a client
 * library would hide the behaviour, hardening-harness.ts): malformed multipart and JSON bodies
 * answer 4xx and leave nothing behind, unknown methods are answered, body limits per route, idle
 * and trickling connections are closed, and one client cannot hold every connection.
 */
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { otherClients, type OtherClients } from '../helpers/other-clients.js';
import { eventually } from '../helpers/server.js';
import {
  connect,
  connected,
  detailString,
  head,
  port,
  raw,
  request,
  server,
  stillServing,
  ubuntuId,
  useServer,
} from './hardening-harness.js';

useServer();

describe('malformed multipart uploads', () => {
  const B = 'burrowBoundary7d3';
  const part = (disposition: string, content: string, extra = '') =>
    `--${B}\r\nContent-Disposition: ${disposition}\r\n${extra}\r\n${content}\r\n`;
  const END = `--${B}--\r\n`;
  const pathPart = (p: string) => part('form-data; name="path"', p);
  const filePart = (content: string) =>
    part('form-data; name="file"; filename="up.txt"', content, 'Content-Type: text/plain\r\n');
  const multipartType = `multipart/form-data; boundary=${B}`;
  const uploadPath = () => `/v1/instance/${ubuntuId}/upload`;
  const upload = (body: string | Buffer, contentType = multipartType) =>
    raw(request('POST', uploadPath(), body, { 'Content-Type': contentType }));

  /**
   * Spool files of the upload route: on the instance's disk (its root, where only the server
   * reaches), or in the instance's directory in the data dir (an instance without a disk).
   */
  function spoolFiles(): string[] {
    const root = join(server.dataDir, 'instances');
    const dirs = readdirSync(root)
      .filter((run) => run.startsWith('run-'))
      .map((run) => join(root, run, ubuntuId));
    const sandboxes = '/var/lib/burrow/sandboxes';
    for (const run of existsSync(sandboxes) ? readdirSync(sandboxes) : []) {
      dirs.push(join(sandboxes, run, ubuntuId, 'disk'));
    }
    return dirs
      .flatMap((dir) => {
        try {
          return readdirSync(dir);
        } catch {
          return [];
        }
      })
      .filter((f) => f.startsWith('.upload-spool-'));
  }

  const cases: [name: string, body: string, contentType: string, status: number][] = [
    ['truncated after the spooled file part', filePart('hello').slice(0, -2), multipartType, 400],
    ['truncated inside the file part', pathPart('a.txt') + filePart('hel'), multipartType, 400],
    ['no closing delimiter', pathPart('a.txt') + filePart('hello'), multipartType, 400],
    ['no boundary', pathPart('a.txt') + filePart('x') + END, 'multipart/form-data', 400],
    [
      'a boundary too long for the parser',
      `--${'b'.repeat(300)}\r\n`,
      `multipart/form-data; boundary=${'b'.repeat(300)}`,
      400,
    ],
    [
      'garbage between delimiters',
      `\x00junk\r\n--${B}\r\n\x00\xff\x13garbage\r\n\r\nzz\r\n--${B}\r\nnope\r\n${END}`,
      multipartType,
      422,
    ],
    [
      'a file part with no name',
      part('form-data; filename="x.txt"', 'x') + END,
      multipartType,
      400,
    ],
    [
      'a field with no name before good parts',
      part('form-data', 'x.txt') + pathPart('b.txt') + filePart('x') + END,
      multipartType,
      400,
    ],
    [
      'a part header bomb',
      `--${B}\r\nContent-Disposition: form-data; name="file"; filename="a"\r\n${'X-A: b\r\n'.repeat(20_000)}\r\nx\r\n${END}`,
      multipartType,
      422,
    ],
    ['too many parts', pathPart('a').repeat(20) + filePart('x') + END, multipartType, 413],
    ['a field too long', pathPart('a'.repeat(100_000)) + filePart('x') + END, multipartType, 413],
  ];

  it.each(cases)('%s → 4xx with a detail', async (_name, body, contentType, status) => {
    const res = await upload(body, contentType);
    expect(res.status, res.text.slice(0, 300)).toBe(status);
    expect(res.body).toEqual(
      status === 422 ? { detail: expect.any(Array) as unknown } : detailString,
    );
    expect(spoolFiles()).toEqual([]);
    await stillServing();
  });

  it('a request head bomb → 431 with a detail', async () => {
    const res = await raw(
      head('POST', uploadPath(), { 'x-api-key': server.apiKey, 'X-Bomb': 'b'.repeat(20_000) }),
    );
    expect(res.status).toBe(431);
    expect(res.body).toEqual(detailString);
    await stillServing();
  });

  it('a client that leaves mid-upload leaves no spool file', async () => {
    const c = connect({ waitMs: 20_000 });
    // the file part comes first, so it is spooled; far less is sent than announced
    c.socket.write(
      request('POST', uploadPath(), '', {
        'Content-Type': multipartType,
        'Content-Length': 10 * 1024 * 1024,
      }),
    );
    c.socket.write(filePart('x'.repeat(64 * 1024)).slice(0, -2));
    await eventually(() => spoolFiles().length === 1, 'the spool file to appear');
    c.socket.destroy();
    await c.result;
    await eventually(() => spoolFiles().length === 0, 'the spool file to be removed');
    await stillServing();
  });

  it('fuzzed bodies never answer 5xx and never hang', async () => {
    let seed = 0x5eed;
    const rand = () => {
      // mulberry32: deterministic, so a failing case replays
      seed = (seed + 0x6d2b79f5) | 0;
      let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
      t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
      return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
    };
    const valid = Buffer.from(pathPart('fuzz/f.txt') + filePart('fuzz content') + END, 'latin1');
    const garbage = (n: number) => Buffer.from(Array.from({ length: n }, () => (rand() * 256) | 0));
    const statuses: number[] = [];
    for (let i = 0; i < 40; i++) {
      const at = Math.floor(rand() * valid.length);
      const body = [
        () => valid.subarray(0, at), // truncated
        () =>
          Buffer.concat([valid.subarray(0, at), garbage(1 + (at % 16)), valid.subarray(at + 8)]),
        () => Buffer.concat([valid.subarray(0, at), garbage(1 + (at % 64)), valid.subarray(at)]),
        () => Buffer.concat([valid.subarray(0, at), valid.subarray(at + 2)]), // a pair dropped
      ][i % 4]!();
      const res = await upload(body);
      expect(res.closed, `fuzz case ${i} hung`).toBe(true);
      expect(res.status, `fuzz case ${i}: ${res.text.slice(0, 200)}`).toBeLessThan(500);
      statuses.push(res.status ?? 0);
    }
    expect(statuses.filter((s) => s >= 400).length).toBeGreaterThan(10);
    expect(spoolFiles()).toEqual([]);
    await stillServing();
  });

  it('uploads larger than the JSON limit still stream through', async () => {
    const form = new FormData();
    form.append('path', 'big/six.bin');
    form.append('file', new Blob([new Uint8Array(6 * 1024 * 1024).fill(7)]), 'six.bin');
    const res = await server.api(uploadPath(), { method: 'POST', body: form });
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ filename: 'six.bin' });
  });
});

describe('JSON bodies', () => {
  const post = (path: string, body: string) =>
    raw(request('POST', path, body, { 'Content-Type': 'application/json' }));

  it('100 000 nested brackets → 422 json_invalid, no stack overflow', async () => {
    for (const body of [
      '['.repeat(100_000),
      '['.repeat(100_000) + ']'.repeat(100_000),
      '{"a":'.repeat(50_000) + '1' + '}'.repeat(50_000),
    ]) {
      const res = await post('/v1/instance/x/bash', body);
      expect(res.status).toBe(422);
      expect(res.body).toEqual({
        detail: [
          {
            loc: ['body', expect.any(Number) as unknown],
            msg: 'JSON decode error',
            type: 'json_invalid',
            ctx: { error: expect.stringContaining('Nesting deeper') as unknown },
          },
        ],
      });
    }
    await stillServing();
  });

  it('a syntax error before the deep part is reported at its own offset', async () => {
    const res = await post('/v1/instance/x/bash', '[1,,' + '['.repeat(10_000));
    expect(res.body).toMatchObject({ detail: [{ loc: ['body', 3], type: 'json_invalid' }] });
  });

  it('nesting within the limit is parsed as usual', async () => {
    const res = await post('/v1/instance/x/bash', '['.repeat(200) + ']'.repeat(200));
    expect(res.status).toBe(422);
    expect(res.body).toMatchObject({ detail: [{ loc: ['body'], type: 'model_attributes_type' }] });
  });

  it('huge numbers → 422 on the field, not 500', async () => {
    for (const [path, body, loc] of [
      ['/v1/start', '{"timeout_hours": 1e400}', 'timeout_hours'],
      ['/v1/start', `{"timeout_hours": 1${'0'.repeat(100_000)}}`, 'timeout_hours'],
      ['/v1/start', `{"timeout_hours": -1${'0'.repeat(400)}.5e-99999}`, 'timeout_hours'],
      ['/v1/instance/x/bash', `{"session": ${'9'.repeat(5_000)}}`, 'session'],
    ] as const) {
      const res = await post(path, body);
      expect(res.status, body.slice(0, 40)).toBe(422);
      expect(res.body).toMatchObject({ detail: [{ loc: ['body', loc] }] });
    }
    await stillServing();
  });

  it('a JSON body announced over 4 MiB → 413 with a detail, before it is read', async () => {
    // only the head is sent: the server answers from Content-Length alone
    const res = await raw(
      head('POST', '/v1/instance/inst_nope/bash', {
        'x-api-key': server.apiKey,
        'Content-Type': 'application/json',
        'Content-Length': 4 * 1024 * 1024 + 1,
      }),
    );
    expect(res.status).toBe(413);
    expect(res.body).toEqual({ detail: 'Request body larger than 4194304 bytes' });

    const under = JSON.stringify({ command: 'true', pad: 'x'.repeat(3 * 1024 * 1024) });
    const ok = await post('/v1/instance/inst_nope/bash', under);
    expect(ok.status).toBe(404); // the body was read and valid; the instance does not exist
  });

  it('a chunked JSON body that grows past the limit → 413 too', async () => {
    const c = connect();
    c.socket.write(
      head('POST', '/v1/instance/inst_nope/bash', {
        'x-api-key': server.apiKey,
        'Content-Type': 'application/json',
        'Transfer-Encoding': 'chunked',
      }),
    );
    const mib = 'x'.repeat(1024 * 1024);
    for (const chunk of [mib, mib, mib, mib, 'x'.repeat(1024)]) {
      c.socket.write(`${chunk.length.toString(16)}\r\n${chunk}\r\n`);
      await sleep(20);
    }
    const res = await c.result;
    expect(res.status).toBe(413);
    expect(res.body).toEqual(detailString);
  });

  it('routes without a body accept only a small one', async () => {
    const res = await raw(
      head('POST', '/v1/instance/inst_nope/stop', {
        'x-api-key': server.apiKey,
        'Content-Type': 'application/json',
        'Content-Length': 100_000,
      }),
    );
    expect(res.status).toBe(413);
    expect(res.body).toEqual({ detail: 'Request body larger than 65536 bytes' });
  });
});

describe('methods', () => {
  it('CONNECT → 405 with a detail instead of a silent close', async () => {
    const res = await raw('CONNECT 127.0.0.1:22 HTTP/1.1\r\nHost: 127.0.0.1:22\r\n\r\n');
    expect(res.status).toBe(405);
    expect(res.text).toMatch(/\r\nAllow: /);
    expect(res.body).toEqual({ detail: 'Method CONNECT is not allowed' });
    expect(res.closed).toBe(true);
  });

  it('methods no route has → 4xx with a detail', async () => {
    for (const method of ['PROPFIND', 'TRACE', 'PATCH', 'PUT', 'DELETE', 'MKCOL']) {
      const anonymous = await raw(head(method, '/v1/instances'));
      expect(anonymous.status, method).toBe(401);
      expect(anonymous.body).toEqual(detailString);
      const keyed = await raw(head(method, '/v1/instances', { 'x-api-key': server.apiKey }));
      expect(keyed.status, method).toBe(404);
      expect(keyed.body).toEqual({ detail: 'Not Found' });
    }
  });

  it('a garbage method → 400 with a detail', async () => {
    for (const line of [
      'FOO%% / HTTP/1.1',
      'G\x01T / HTTP/1.1',
      '\x16\x03\x01\x02\x00 / HTTP/1.1',
    ]) {
      const res = await raw(`${line}\r\nHost: x\r\n\r\n`);
      expect(res.status, JSON.stringify(line)).toBe(400);
      expect(res.body).toEqual(detailString);
    }
    await stillServing();
  });

  it('WebSocket upgrades are still routed', async () => {
    const unknown = await raw(
      head('GET', '/cdp/inst_nope/devtools/browser/x', {
        Upgrade: 'websocket',
        Connection: 'Upgrade',
        'Sec-WebSocket-Key': 'dGhlIHNhbXBsZSBub25jZQ==',
        'Sec-WebSocket-Version': 13,
      }).replace('Connection: close\r\n', ''),
    );
    // an unknown id is the wrong token's 401 there (the upgrade was routed to its token check)
    expect(unknown.status).toBe(401);

    const res = await server.api(`/v1/instance/${ubuntuId}/stream_url`);
    const streamUrl = new URL(((await res.json()) as { stream_url: string }).stream_url);
    const token = streamUrl.searchParams.get('token') ?? '';
    const ws = new WebSocket(
      `ws://127.0.0.1:${port}/stream/${ubuntuId}/websockify?token=${encodeURIComponent(token)}`,
    );
    await new Promise<void>((resolve, reject) => {
      ws.once('open', () => resolve());
      ws.once('error', reject);
    });
    ws.close();
  });
});

describe.concurrent('slow and idle clients', () => {
  it('an idle connection is answered 408 and closed within seconds', async () => {
    const res = await connect({ waitMs: 20_000 }).result;
    expect(res.closed).toBe(true);
    expect(res.ms).toBeLessThan(13_000);
    expect(res.status).toBe(408);
    expect(res.body).toEqual(detailString);
  });

  it('a head trickled a byte at a time (slowloris) is closed within seconds', async () => {
    const c = connect({ waitMs: 20_000 });
    const text = head('GET', '/v1/instances', { 'x-api-key': server.apiKey });
    let i = 0;
    const timer = setInterval(() => {
      if (i < text.length - 2 && !c.socket.destroyed) c.socket.write(text[i++]!);
    }, 200);
    const res = await c.result;
    clearInterval(timer);
    expect(res.closed).toBe(true);
    expect(res.ms).toBeLessThan(13_000);
    expect(res.status).toBe(408);
  });

  it('an idle keep-alive connection is closed within seconds of its last answer', async () => {
    const c = connect({ waitMs: 20_000 });
    c.socket.write(
      head('GET', '/v1/instances', { 'x-api-key': server.apiKey }).replace(
        'Connection: close',
        'Connection: keep-alive',
      ),
    );
    const res = await c.result;
    expect(res.status).toBe(200);
    expect(res.closed).toBe(true);
    expect(res.ms).toBeLessThan(8_000);
  });

  it('a body trickled a byte at a time is cut after the grace period', async () => {
    const c = connect({ waitMs: 30_000 });
    c.socket.write(
      request('POST', '/v1/instance/inst_nope/bash', '', {
        'Content-Type': 'application/json',
        'Content-Length': 100_000,
      }),
    );
    const timer = setInterval(() => !c.socket.destroyed && c.socket.write(' '), 250);
    const res = await c.result;
    clearInterval(timer);
    expect(res.closed).toBe(true);
    expect(res.ms).toBeLessThan(14_000);
    expect(res.status).toBeUndefined(); // cut, not answered: the request never arrived
  });

  it('a slow but steady upload outlasts the grace period', async () => {
    const B = 'steadyBoundary';
    const prefix = `--${B}\r\nContent-Disposition: form-data; name="path"\r\n\r\nsteady.bin\r\n--${B}\r\nContent-Disposition: form-data; name="file"; filename="steady.bin"\r\n\r\n`;
    const suffix = `\r\n--${B}--\r\n`;
    const chunk = Buffer.alloc(16 * 1024, 0x61);
    const chunks = 28; // 448 KiB at 32 KiB/s: 14 s, well past the 10 s grace
    const c = connect({ waitMs: 40_000 });
    c.socket.write(
      head('POST', `/v1/instance/${ubuntuId}/upload`, {
        'x-api-key': server.apiKey,
        'Content-Type': `multipart/form-data; boundary=${B}`,
        'Content-Length': prefix.length + chunk.length * chunks + suffix.length,
      }) + prefix,
    );
    for (let i = 0; i < chunks && !c.socket.destroyed; i++) {
      c.socket.write(chunk);
      await sleep(500);
    }
    c.socket.write(suffix);
    const res = await c.result;
    expect(res.status, res.text.slice(0, 300)).toBe(200);
    expect(res.body).toMatchObject({ filename: 'steady.bin' });
  });

  it('a handler that runs longer than every timeout still answers', async () => {
    const res = await server.api(`/v1/instance/${ubuntuId}/bash`, {
      json: { command: 'sleep 14; echo still-here', timeout: 60 },
    });
    expect(res.status).toBe(200);
    expect(JSON.stringify(await res.json())).toContain('still-here');
  });
});

describe('connections per client', () => {
  // the crowd comes from an address of its own: every loopback address is this host, one client,
  // which the test's own requests (and the other client below) are
  let crowdClient: OtherClients;
  let crowdAddress = '';
  beforeAll(() => {
    crowdClient = otherClients(1);
    crowdAddress = crowdClient.addresses[0]!;
  });
  afterAll(() => crowdClient?.remove());

  it('past 64 authenticated connections a client gets 429; others are unaffected', async () => {
    const crowd = Array.from({ length: 64 }, () => connect({ localAddress: crowdAddress }));
    const keepAlive = (path: string) =>
      request('GET', path)
        .toString('latin1')
        .replace('Connection: close', 'Connection: keep-alive');
    try {
      await Promise.all(crowd.map((c) => connected(c.socket)));
      // connections count against the cap once they authenticate (idle ones have a budget of
      // their own, test/integration/dos/dos-connections.test.ts)
      for (const c of crowd) c.socket.write(keepAlive('/v1/instances'));
      await sleep(500);

      const over = await raw(request('GET', '/v1/instances'), { localAddress: crowdAddress });
      expect(over.status).toBe(429);
      expect(over.text).toMatch(/\r\nretry-after: 1\r\n/i);
      expect(over.body).toEqual({ detail: expect.stringContaining('limit 64') as unknown });
      expect(over.closed).toBe(true);

      const res = await server.api(`/v1/instance/${ubuntuId}/stream_url`);
      const streamUrl = new URL(((await res.json()) as { stream_url: string }).stream_url);
      const token = encodeURIComponent(streamUrl.searchParams.get('token') ?? '');
      const upgrade = await raw(
        head('GET', `/stream/${ubuntuId}/websockify?token=${token}`, {
          Upgrade: 'websocket',
          Connection: 'Upgrade',
          'Sec-WebSocket-Key': 'dGhlIHNhbXBsZSBub25jZQ==',
          'Sec-WebSocket-Version': 13,
        }).replace('Connection: close\r\n', ''),
        { localAddress: crowdAddress },
      );
      expect(upgrade.status).toBe(429);

      const other = await raw(request('GET', '/v1/instances'), { localAddress: '127.0.0.4' });
      expect(other.status).toBe(200);

      // a connection of the crowd still works, and closing one frees a place
      crowd[0]!.socket.write(request('GET', '/v1/instances'));
      expect((await crowd[0]!.result).text).toMatch(/HTTP\/1\.1 200 [^]*HTTP\/1\.1 200 /);
      await eventually(
        async () =>
          (await raw(request('GET', '/v1/instances'), { localAddress: crowdAddress })).status ===
          200,
        'a freed place',
      );
    } finally {
      for (const c of crowd) c.socket.destroy();
    }
  });
});
