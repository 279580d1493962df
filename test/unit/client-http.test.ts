/**
 * The request loop against a fake HTTP peer on 127.0.0.1:0 that injects what a real server
 * cannot produce on demand: chosen statuses, Retry-After, dropped connections, bad bodies.
 */
import { createServer as createTcpServer, type AddressInfo, type Socket } from 'node:net';
import { createServer, type IncomingHttpHeaders, type ServerResponse } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import {
  AbortError,
  APIError,
  AuthenticationError,
  BadRequestError,
  Burrow,
  BurrowError,
  ClientClosedError,
  ConnectionError,
  ContractError,
  InvalidRequestError,
  NotFoundError,
  PayloadTooLargeError,
  RateLimitError,
  ServerError,
  TimeoutError,
  ValidationError,
  type BurrowOptions,
  type Clock,
} from '../../src/client/index.js';

const API_KEY = 'bk_live_S3cr3tKeyThatMustNeverLeak';
const INSTANCE = {
  id: 'i-1',
  launch_time: '2025-06-01T12:00:00Z',
  instance_type: 'ubuntu',
  status: 'running',
};

interface Seen {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  body: string;
}
type Reply = (res: ServerResponse, req: Seen) => void;

const json =
  (status: number, body: unknown, headers: Record<string, string> = {}): Reply =>
  (res) => {
    res.writeHead(status, { 'content-type': 'application/json', ...headers });
    res.end(JSON.stringify(body));
  };
const hang: Reply = () => {};
const drop: Reply = (res) => res.socket?.destroy();

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  await Promise.all(cleanups.splice(0).map((c) => c()));
});

/** A server answering its n-th request with `replies[n]` (the last one repeats). */
async function fakeServer(...replies: Reply[]) {
  const seen: Seen[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const entry = {
        method: req.method ?? '',
        url: req.url ?? '',
        headers: req.headers,
        body: Buffer.concat(chunks).toString(),
      };
      seen.push(entry);
      (replies[seen.length - 1] ?? replies.at(-1) ?? hang)(res, entry);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanups.push(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen };
}

/** A clock that records the delays instead of sleeping. */
function fakeClock(now = Date.parse('2025-06-01T12:00:00Z')) {
  const sleeps: number[] = [];
  const clock: Clock = {
    now: () => now,
    sleep: async (ms) => {
      sleeps.push(ms);
    },
    random: () => 0.5,
  };
  return { clock, sleeps };
}

function client(baseUrl: string, options: BurrowOptions = {}) {
  const burrow = new Burrow({ baseUrl, apiKey: API_KEY, clock: fakeClock().clock, ...options });
  cleanups.push(() => burrow.close());
  return burrow;
}

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error('expected a rejection');
}

/** A port nothing listens on. */
async function closedPort(): Promise<number> {
  const server = createTcpServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

describe('requests on the wire', () => {
  it('sends the API key, JSON body and accept header; parses the response', async () => {
    const { url, seen } = await fakeServer(json(200, { ...INSTANCE, future_field: 1 }));
    const burrow = client(url, { headers: { 'X-Trace': 'client' } });
    const instance = await burrow.instances.start(
      { instance_type: 'ubuntu', timeout_hours: 0.5 },
      { headers: { 'x-trace': 'call' } },
    );
    expect(instance).toMatchObject(INSTANCE);
    expect(seen).toHaveLength(1);
    expect(seen[0]).toMatchObject({ method: 'POST', url: '/v1/start' });
    expect(seen[0]?.headers).toMatchObject({
      'x-api-key': API_KEY,
      accept: 'application/json',
      'content-type': 'application/json',
      'x-trace': 'call',
    });
    expect(JSON.parse(seen[0]?.body ?? '')).toEqual({
      instance_type: 'ubuntu',
      timeout_hours: 0.5,
    });
  });

  it('percent-encodes path parameters, "/" included, and keeps a base path prefix', async () => {
    const { url, seen } = await fakeServer(
      json(200, { cells: [], id: 'n', name: 'n', kernel_name: 'k' }),
    );
    const burrow = client(`${url}/prefix/`);
    await burrow.notebooks.get('a/b c', '..x?#');
    expect(seen[0]?.url).toBe('/prefix/v1/instance/a%2Fb%20c/notebook/..x%3F%23');
  });

  it('sends query parameters as strings and omits absent ones', async () => {
    const { url, seen } = await fakeServer(
      json(200, INSTANCE),
      json(200, { status: 'saved', auth_state_id: 'a1' }),
      json(200, { status: 'saved', auth_state_id: 'a1', name: 'x y' }),
    );
    const burrow = client(url);
    await burrow.instances.resume('i-1', { timeout_hours: 2.5 });
    await burrow.browser.saveAuth('i-1');
    await burrow.browser.modifyAuth('i-1', { auth_state_id: 'a1', name: 'x y' });
    expect(seen.map((s) => s.url)).toEqual([
      '/v1/instance/i-1/resume?timeout_hours=2.5',
      '/v1/instance/i-1/browser/save_auth',
      '/v1/instance/i-1/browser/modify_auth?auth_state_id=a1&name=x+y',
    ]);
    expect(seen.map((s) => s.body)).toEqual(['', '', '']);
  });
});

describe('pre-send validation', () => {
  it.each([
    ['timeout_hours above 24', { timeout_hours: 25 }, 'body.timeout_hours'],
    ['timeout_hours below 0.01', { timeout_hours: 0.001 }, 'body.timeout_hours'],
    ['resolution with one value', { resolution: [1024] }, 'body.resolution'],
    ['resolution with a zero', { resolution: [0, 768] }, 'body.resolution.0'],
    ['an unknown instance type', { instance_type: 'mac' }, 'body.instance_type'],
  ])('rejects %s without sending anything', async (_, body, field) => {
    const { url, seen } = await fakeServer(json(200, INSTANCE));
    const error = await rejection(client(url).instances.start(body as never));
    expect(error).toBeInstanceOf(InvalidRequestError);
    expect(error).toMatchObject({ code: 'invalid_request', operation: 'instances.start' });
    expect((error as Error).message).toContain(`instances.start: invalid request: ${field}: `);
    expect(seen).toHaveLength(0);
  });

  it('rejects a bad computer action and a missing required query field', async () => {
    const { url, seen } = await fakeServer(json(200, {}));
    const burrow = client(url);
    const action = await rejection(burrow.instance.computer('i', { action: 'fly' } as never));
    expect((action as InvalidRequestError).issues[0]?.type).toBe('union_tag_invalid');
    const query = await rejection(burrow.browser.authenticate('i', {} as never));
    expect((query as InvalidRequestError).issues[0]).toMatchObject({
      loc: ['query', 'auth_state_id'],
      type: 'missing',
    });
    expect(seen).toHaveLength(0);
  });

  it.each(['', '.', '..'])('rejects the path parameter %j', async (id) => {
    const { url, seen } = await fakeServer(json(200, INSTANCE));
    const error = await rejection(client(url).instances.get(id));
    expect(error).toBeInstanceOf(InvalidRequestError);
    expect((error as InvalidRequestError).issues[0]?.loc).toEqual(['path', 'instance_id']);
    expect(seen).toHaveLength(0);
  });

  it('rejects invalid per-call options', async () => {
    const { url, seen } = await fakeServer(json(200, []));
    const burrow = client(url);
    await expect(burrow.instances.list({ timeoutMs: 0 })).rejects.toMatchObject({
      code: 'invalid_option',
    });
    await expect(burrow.instances.list({ maxRetries: -1 })).rejects.toMatchObject({
      code: 'invalid_option',
    });
    expect(seen).toHaveLength(0);
  });
});

describe('error mapping', () => {
  it.each([
    [400, BadRequestError, 'bad_request'],
    [401, AuthenticationError, 'authentication_failed'],
    [404, NotFoundError, 'not_found'],
    [413, PayloadTooLargeError, 'payload_too_large'],
    [422, ValidationError, 'validation_failed'],
    [429, RateLimitError, 'rate_limited'],
    [500, ServerError, 'server_error'],
    [503, ServerError, 'server_error'],
    [403, APIError, 'api_error'],
    [409, APIError, 'api_error'],
  ])('%i → %o', async (status, Class, code) => {
    const { url } = await fakeServer(json(status, { detail: `detail for ${status}` }));
    const error = await rejection(client(url, { maxRetries: 0 }).instances.get('i-1'));
    expect(error).toBeInstanceOf(Class);
    expect(error).toBeInstanceOf(APIError);
    expect(error).toBeInstanceOf(BurrowError);
    expect(Object.getPrototypeOf(error)).toBe(Class.prototype);
    expect(error).toMatchObject({
      code,
      status,
      method: 'GET',
      path: '/v1/instance/i-1',
      body: { detail: `detail for ${status}` },
      name: Class.name,
    });
    expect((error as Error).message).toBe(
      `GET /v1/instance/i-1 failed with status ${status}: detail for ${status}`,
    );
  });

  it('422: exposes the parsed detail and names the fields in the message', async () => {
    const detail = [
      {
        loc: ['body', 'timeout_hours'],
        msg: 'Input should be less than or equal to 24',
        type: 'less_than_equal',
      },
      { loc: ['body', 'resolution', 0], msg: 'Input should be a valid integer', type: 'int_type' },
    ];
    const { url } = await fakeServer(json(422, { detail }));
    const error = (await rejection(client(url).instances.start())) as ValidationError;
    expect(error).toBeInstanceOf(ValidationError);
    expect(error.detail).toEqual(detail);
    expect(error.message).toBe(
      'POST /v1/start failed with status 422: body.timeout_hours: Input should be less than or ' +
        'equal to 24; body.resolution.0: Input should be a valid integer',
    );
  });

  it('a non-JSON error body is kept as text', async () => {
    const { url } = await fakeServer((res) => {
      res.writeHead(502, { 'content-type': 'text/html' });
      res.end('<h1>Bad Gateway</h1>');
    });
    const error = await rejection(client(url, { maxRetries: 0 }).instances.list());
    expect(error).toMatchObject({ status: 502, body: '<h1>Bad Gateway</h1>' });
    expect((error as Error).message).toContain('<h1>Bad Gateway</h1>');
  });

  it('never shows the API key or a token= value, even if the server echoes them', async () => {
    const { url } = await fakeServer(
      json(400, {
        detail: `bad key ${API_KEY}; connect to ws://127.0.0.1/cdp/x?token=tok_123456&v=1`,
      }),
    );
    const error = await rejection(client(url).instances.get('i-1'));
    for (const text of [(error as Error).message, String(error), JSON.stringify(error)]) {
      expect(text).not.toContain(API_KEY);
      expect(text).not.toContain('tok_123456');
    }
    expect((error as Error).message).toContain('bad key [REDACTED]');
    expect((error as Error).message).toContain('?token=[REDACTED]&v=1');
  });

  it('a 2xx body that breaks the response schema → ContractError', async () => {
    const { url } = await fakeServer(json(200, { ...INSTANCE, status: 'sleeping' }));
    const error = (await rejection(client(url).instances.get('i-1'))) as ContractError;
    expect(error).toBeInstanceOf(ContractError);
    expect(error).toMatchObject({ code: 'contract_violation', status: 200, method: 'GET' });
    expect(error.issues[0]).toMatchObject({ loc: ['body', 'status'], type: 'enum' });
    expect(error.message).toContain('body.status: Input should be');
  });

  it('a 2xx body that is not JSON → ContractError, and a token in it is redacted', async () => {
    const { url } = await fakeServer((res) => res.end('ws://h/cdp?token=tok_abcdef'));
    const error = (await rejection(client(url).browser.cdpUrl('i-1'))) as ContractError;
    expect(error).toBeInstanceOf(ContractError);
    expect(error.issues).toEqual([]);
    expect(error.body).toBe('ws://h/cdp?token=[REDACTED]');
  });
});

describe('retries', () => {
  it('GET: retries 503 with backoff, then succeeds', async () => {
    const { url, seen } = await fakeServer(json(503, {}), json(503, {}), json(200, [INSTANCE]));
    const { clock, sleeps } = fakeClock();
    const list = await client(url, { clock }).instances.list();
    expect(list).toHaveLength(1);
    expect(seen).toHaveLength(3);
    expect(sleeps).toEqual([500, 1000]);
  });

  it('honours Retry-After in seconds and as an HTTP date', async () => {
    const now = Date.parse('2025-06-01T12:00:00Z');
    const { url } = await fakeServer(
      json(429, {}, { 'retry-after': '3' }),
      json(503, {}, { 'retry-after': new Date(now + 7000).toUTCString() }),
      json(200, INSTANCE),
    );
    const { clock, sleeps } = fakeClock(now);
    await client(url, { clock }).instances.get('i-1');
    expect(sleeps).toEqual([3000, 7000]);
  });

  it('gives up at once when Retry-After exceeds the cap, exposing retryAfterMs', async () => {
    const { url, seen } = await fakeServer(json(429, { detail: 'busy' }, { 'retry-after': '120' }));
    const { clock, sleeps } = fakeClock();
    const error = await rejection(client(url, { clock }).instances.get('i-1'));
    expect(error).toBeInstanceOf(RateLimitError);
    expect((error as RateLimitError).retryAfterMs).toBe(120_000);
    expect(seen).toHaveLength(1);
    expect(sleeps).toEqual([]);
  });

  it('stops after maxRetries (per call) and throws the last error', async () => {
    const { url, seen } = await fakeServer(json(500, { detail: 'boom' }));
    const { clock, sleeps } = fakeClock();
    const burrow = client(url, { clock, maxRetries: 5 });
    await expect(burrow.instances.get('i-1', { maxRetries: 1 })).rejects.toBeInstanceOf(
      ServerError,
    );
    expect(seen).toHaveLength(2);
    expect(sleeps).toEqual([500]);
  });

  it.each([
    ['instances.start', (b: Burrow) => b.instances.start()],
    ['instance.bash', (b: Burrow) => b.instance.bash('i-1', { command: 'rm -rf x' })],
    ['code.execute', (b: Burrow) => b.code.execute('i-1', { code: 'x += 1' })],
  ])('never retries the non-idempotent %s after a 5xx', async (_, call) => {
    const { url, seen } = await fakeServer(json(503, { detail: 'down' }), json(200, INSTANCE));
    const error = await rejection(call(client(url)));
    expect(error).toBeInstanceOf(ServerError);
    expect(seen).toHaveLength(1);
  });

  it('retries a dropped connection on GET', async () => {
    const { url, seen } = await fakeServer(drop, json(200, INSTANCE));
    const { clock, sleeps } = fakeClock();
    await expect(client(url, { clock }).instances.get('i-1')).resolves.toMatchObject(INSTANCE);
    expect(seen).toHaveLength(2);
    expect(sleeps).toEqual([500]);
  });

  it('does not retry a dropped connection on a non-idempotent POST', async () => {
    const { url, seen } = await fakeServer(drop, json(200, INSTANCE));
    const error = await rejection(client(url).instances.start());
    expect(error).toBeInstanceOf(ConnectionError);
    expect(error).toMatchObject({ code: 'connection_failed', connectFailed: false });
    expect(seen).toHaveLength(1);
  });

  it('retries even POST /v1/start when the connection was refused (nothing was sent)', async () => {
    const port = await closedPort();
    const sleeps: number[] = [];
    let server: ReturnType<typeof createServer> | undefined;
    const clock: Clock = {
      now: () => 0,
      random: () => 0.5,
      // The server comes up during the first wait.
      sleep: async (ms) => {
        sleeps.push(ms);
        server ??= createServer((_, res) => json(200, INSTANCE)(res, {} as Seen));
        if (!server.listening) {
          await new Promise<void>((resolve) => server?.listen(port, '127.0.0.1', resolve));
        }
      },
    };
    cleanups.push(async () => {
      server?.closeAllConnections();
      await new Promise((resolve) => (server?.listening ? server.close(resolve) : resolve(null)));
    });
    const burrow = client(`http://127.0.0.1:${port}`, { clock });
    await expect(burrow.instances.start()).resolves.toMatchObject(INSTANCE);
    expect(sleeps).toEqual([500]);
  });

  it('a refused connection fails with connectFailed once retries are spent', async () => {
    const { clock, sleeps } = fakeClock();
    const burrow = client(`http://127.0.0.1:${await closedPort()}`, { clock });
    const error = await rejection(burrow.instances.list());
    expect(error).toBeInstanceOf(ConnectionError);
    expect(error).toMatchObject({ connectFailed: true, method: 'GET', path: '/v1/instances' });
    expect((error as Error).message).toContain('ECONNREFUSED');
    expect(sleeps).toEqual([500, 1000]);
  });

  it('a response that is not HTTP → ConnectionError', async () => {
    const sockets: Socket[] = [];
    const server = createTcpServer((socket) => {
      sockets.push(socket);
      socket.end('garbage\r\n\r\n');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    cleanups.push(async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    });
    const { port } = server.address() as AddressInfo;
    const error = await rejection(client(`http://127.0.0.1:${port}`).instances.start());
    expect(error).toBeInstanceOf(ConnectionError);
    expect((error as ConnectionError).connectFailed).toBe(false);
  });
});

describe('timeouts and abort', () => {
  it('timeoutMs → TimeoutError, not retried', async () => {
    const { url, seen } = await fakeServer(hang);
    const started = performance.now();
    const error = await rejection(client(url).instances.get('i-1', { timeoutMs: 150 }));
    expect(error).toBeInstanceOf(TimeoutError);
    expect(error).toMatchObject({ code: 'timeout', timeoutMs: 150 });
    expect(performance.now() - started).toBeLessThan(2000);
    expect(seen).toHaveLength(1);
  });

  it('the timeout also covers a body that stalls after the headers', async () => {
    const { url } = await fakeServer((res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('{"id":');
    });
    const error = await rejection(
      client(url, { timeoutMs: 150, maxRetries: 0 }).instances.get('i'),
    );
    expect(error).toBeInstanceOf(TimeoutError);
  });

  it('aborting the signal → AbortError quickly, with the reason as cause', async () => {
    const { url } = await fakeServer(hang);
    const controller = new AbortController();
    const reason = new Error('user gave up');
    setTimeout(() => controller.abort(reason), 50);
    const started = performance.now();
    const error = await rejection(
      client(url).instances.get('i-1', { signal: controller.signal, timeoutMs: 60_000 }),
    );
    expect(error).toBeInstanceOf(AbortError);
    expect(error).toMatchObject({ code: 'aborted', cause: reason });
    expect(performance.now() - started).toBeLessThan(1000);
  });

  it('an already aborted signal sends nothing', async () => {
    const { url, seen } = await fakeServer(json(200, []));
    const error = await rejection(client(url).instances.list({ signal: AbortSignal.abort() }));
    expect(error).toBeInstanceOf(AbortError);
    expect(seen).toHaveLength(0);
  });

  it('aborting during the wait between retries → AbortError, no further attempt', async () => {
    const { url, seen } = await fakeServer(json(503, {}));
    const controller = new AbortController();
    const clock: Clock = {
      now: () => 0,
      random: () => 0.5,
      sleep: (_ms, signal) =>
        new Promise((_, reject) => {
          signal?.addEventListener('abort', () => reject(signal.reason as Error));
          controller.abort();
        }),
    };
    const error = await rejection(
      client(url, { clock }).instances.list({ signal: controller.signal }),
    );
    expect(error).toBeInstanceOf(AbortError);
    expect(seen).toHaveLength(1);
  });
});

describe('lifecycle', () => {
  it('close() is idempotent; calls after it throw ClientClosedError without sending', async () => {
    const { url, seen } = await fakeServer(json(200, []));
    const burrow = new Burrow({ baseUrl: url, apiKey: API_KEY });
    await burrow.instances.list();
    const first = burrow.close();
    expect(burrow.close()).toBe(first);
    await first;
    await expect(burrow.instances.list()).rejects.toBeInstanceOf(ClientClosedError);
    expect(seen).toHaveLength(1);
  });

  it('Symbol.asyncDispose closes the client', async () => {
    const { url } = await fakeServer(json(200, []));
    const burrow = new Burrow({ baseUrl: url, apiKey: API_KEY });
    await burrow[Symbol.asyncDispose]();
    await expect(burrow.authStates.list()).rejects.toMatchObject({ code: 'client_closed' });
  });
});
