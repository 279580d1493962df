/**
 * The API key and the per-instance token (cdp_url, live view), checked the way a client that has
 * the wrong one tries them: no key, an empty one, a differently-cased one, one a character short
 * or long, the key in the query string instead of the header; no token, a token of another
 * instance, a token in another case. The app runs in memory (`inject`); the upgrade routing gets
 * a socket that records what was written to it.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import type { IncomingMessage } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Duplex } from 'node:stream';
import Fastify, { type FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import {
  buildApp,
  createLogger,
  handleUpgrade,
  registerStreamPages,
  safeEqual,
  UPGRADE_TIMEOUT_MS,
} from '../../src/server/http/app.js';
import { AuthStore } from '../../src/server/auth-states/store.js';
import { HttpError, serverError } from '../../src/server/errors.js';
import { Registry } from '../../src/server/instances/registry.js';
import type { SandboxHost } from '../../src/server/sandbox/index.js';

const KEY = 'bk_Secret-Key_0123456789abcdef';

describe('safeEqual', () => {
  it('is true only for the same string', () => {
    expect(safeEqual(KEY, KEY)).toBe(true);
    expect(safeEqual('', '')).toBe(true);
    for (const other of [KEY.toUpperCase(), KEY.slice(0, -1), `${KEY}0`, '', ` ${KEY}`, 'x']) {
      expect(safeEqual(other, KEY), JSON.stringify(other)).toBe(false);
      expect(safeEqual(KEY, other), JSON.stringify(other)).toBe(false);
    }
  });
});

describe('the API key', () => {
  let dir: string;
  let app: Awaited<ReturnType<typeof buildApp>>;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'burrow-authcheck-'));
    const logger = createLogger('silent');
    const registry = new Registry({
      instancesDir: dir,
      maxInstances: 1,
      factories: {},
      publicUrl: () => 'http://127.0.0.1',
      chromiumPath: '',
      maxUploadBytes: 1024,
      log: logger,
      sandboxHost: undefined as unknown as SandboxHost, // no instance is started here
    });
    app = await buildApp({
      apiKey: KEY,
      registry,
      authStore: new AuthStore(dir, { env: {}, warn: () => {} }),
      maxUploadBytes: 1024,
      logger,
    });
  });
  afterAll(async () => {
    await app.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const get = (url: string, headers: Record<string, string> = {}) =>
    app.inject({ method: 'GET', url, headers });

  it('opens the API with the exact key', async () => {
    const res = await get('/v1/instances', { 'x-api-key': KEY });
    expect(res.statusCode).toBe(200);
  });

  it('answers 401 unauthorized to every other key, and to none', async () => {
    const wrong: (Record<string, string> | undefined)[] = [
      undefined,
      { 'x-api-key': '' },
      { 'x-api-key': KEY.toUpperCase() },
      { 'x-api-key': KEY.slice(0, -1) },
      { 'x-api-key': `${KEY}f` },
      { authorization: `Bearer ${KEY}` },
      { 'x-api-token': KEY },
    ];
    for (const headers of wrong) {
      const res = await get('/v1/instances', headers);
      expect(res.statusCode, JSON.stringify(headers)).toBe(401);
      expect(res.headers['x-burrow-error']).toBe('unauthorized');
      expect(res.json()).toEqual({ detail: 'Missing or invalid API key (header x-api-key)' });
    }
    const inQuery = await get(`/v1/instances?x-api-key=${KEY}&api_key=${KEY}`);
    expect(inQuery.statusCode).toBe(401);
  });

  it('leaves only GET and HEAD of the public description open, query string or not', async () => {
    expect((await get('/openapi.json')).statusCode).toBe(200);
    expect((await get('/openapi.json?x=1')).statusCode).toBe(200);
    expect((await app.inject({ method: 'HEAD', url: '/openapi.json' })).statusCode).toBe(200);
    const post = await app.inject({ method: 'POST', url: '/openapi.json', payload: '{}' });
    expect(post.statusCode).toBe(401);
    const del = await app.inject({ method: 'DELETE', url: '/docs' });
    expect(del.statusCode).toBe(401);
    // a public name elsewhere in the path is not public
    expect((await get('/v1/openapi.json')).statusCode).toBe(401);
    expect((await get('/openapi.json/x')).statusCode).toBe(401);
  });

  it('sends live-view pages to their token check, not the key check', async () => {
    // an id nobody has is answered as a wrong token: these routes need no key, so they must not
    // tell which ids exist
    const res = await get('/stream/inst_none/index.html');
    expect([res.statusCode, res.headers['x-burrow-error']]).toEqual([401, 'token_invalid']);
    // a path that only looks like one
    expect((await get('/v1/stream/inst_none/index.html')).statusCode).toBe(401);
  });
});

/** A record as the registry holds it, for the upgrade and page routing. */
interface FakeRec {
  token: string;
  live: boolean;
  status: string;
  runtime?: {
    upgrade?: (...args: unknown[]) => void;
    liveView?: {
      url: () => Promise<string>;
      page: (rest: string, q: URLSearchParams) => Promise<unknown>;
    };
  };
}

function fakeRegistry(recs: Record<string, FakeRec>) {
  return {
    get(id: string) {
      const rec = recs[id];
      if (!rec) throw serverError('instance_not_found', { id });
      return rec;
    },
    // no hand-offs here (their tokens: test/integration/instances/handoff.test.ts); activity is not counted
    handoffs: { pending: () => [], attach: () => {} },
    connected: () => () => {},
    touch: () => {},
  } as unknown as Registry;
}

/** A socket that records what the server writes and whether it ended it. */
class RecordingSocket extends Duplex {
  written = '';
  ended = false;
  override _read(): void {}
  override _write(chunk: Buffer, _enc: BufferEncoding, cb: () => void): void {
    this.written += chunk.toString();
    cb();
  }
  override _final(cb: () => void): void {
    this.ended = true;
    cb();
  }
}

const TOKEN = 'tok_0123456789abcdefABCDEF';

describe('the instance token of a WebSocket upgrade', () => {
  const upgrades: unknown[][] = [];
  const running: FakeRec = {
    token: TOKEN,
    live: true,
    status: 'running',
    runtime: { upgrade: (...args) => upgrades.push(args) },
  };
  const registry = fakeRegistry({
    inst_a: running,
    inst_b: { ...running, token: 'tok_other_instance_token_000' },
    inst_gone: { ...running, live: false, status: 'stopped' },
    inst_nort: { token: TOKEN, live: true, status: 'running', runtime: {} },
    inst_norec: { token: TOKEN, live: true, status: 'running' },
    inst_paused: { ...running, status: 'paused' },
    inst_hang: { ...running, runtime: { upgrade: () => {} } },
  });

  async function upgrade(url: string) {
    const socket = new RecordingSocket();
    const head = Buffer.from('head');
    const req = { url, headers: {} } as IncomingMessage;
    const before = upgrades.length;
    handleUpgrade(registry, req, socket, head);
    await new Promise((r) => setImmediate(r));
    const passed = upgrades.length > before ? upgrades[upgrades.length - 1] : undefined;
    if (passed) socket.destroy();
    const status = /^HTTP\/1\.1 (\d+)/.exec(socket.written)?.[1];
    const code = /x-burrow-error: (\S+)/.exec(socket.written)?.[1];
    const body = socket.written.split('\r\n\r\n')[1];
    return { socket, passed, status, code, body, head, req };
  }

  it('passes the right token to the runtime, with what it routes on', async () => {
    const r = await upgrade(`/cdp/inst_a/devtools/browser/x?token=${TOKEN}`);
    expect(r.socket.written).toBe(''); // nothing refused: the runtime answers
    expect(r.passed).toBeDefined();
    const [kind, rest, req, socket, head] = r.passed!;
    expect([kind, rest]).toEqual(['cdp', 'devtools/browser/x']);
    expect(req).toBe(r.req);
    expect(socket).toBe(r.socket);
    expect(head).toBe(r.head);
    const s = await upgrade(`/stream/inst_a/websockify?token=${TOKEN}`);
    expect(s.passed?.slice(0, 2)).toEqual(['stream', 'websockify']);
  });

  it('refuses a missing, empty, wrong-case, other-instance or partial token with 401', async () => {
    for (const query of [
      '',
      '?token=',
      `?token=${TOKEN.toLowerCase()}`,
      '?token=tok_other_instance_token_000',
      `?token=${TOKEN.slice(0, -1)}`,
      `?token=${TOKEN}x`,
      `?tok=${TOKEN}`,
    ]) {
      const r = await upgrade(`/cdp/inst_a/devtools/browser/x${query}`);
      expect(r.passed, query).toBeUndefined();
      expect([r.status, r.code], query).toEqual(['401', 'token_invalid']);
      expect(r.body).toBe(JSON.stringify({ detail: 'Invalid or expired CDP token' }));
      expect(r.socket.ended).toBe(true);
    }
    const view = await upgrade('/stream/inst_a/websockify?token=nope');
    expect(view.body).toBe(JSON.stringify({ detail: 'Invalid or expired live-view token' }));
    // another instance's token does not open this one, nor this one's that one
    const cross = await upgrade(`/cdp/inst_b/devtools/browser/x?token=${TOKEN}`);
    expect(cross.code).toBe('token_invalid');
  });

  it('answers 404 for other paths, and 401 for unknown instances as for a wrong token', async () => {
    for (const url of [
      '/',
      '/cdp/inst_a',
      '/cdp//x',
      '/ws/inst_a/x?token=' + TOKEN,
      '/CDP/inst_a/x',
      `/v1/cdp/inst_a/x?token=${TOKEN}`, // the prefix must be the whole path's start
    ]) {
      const r = await upgrade(url);
      expect([r.status, r.code], url).toEqual(['404', 'not_found']);
    }
    const unknown = await upgrade(`/cdp/inst_zz/devtools/browser/x?token=${TOKEN}`);
    expect([unknown.status, unknown.code]).toEqual(['401', 'token_invalid']);
  });

  it('with the right token, says why an instance cannot take it', async () => {
    const gone = await upgrade(`/cdp/inst_gone/x?token=${TOKEN}`);
    expect([gone.status, gone.code]).toEqual(['410', 'instance_gone']);
    expect(gone.body).toBe(JSON.stringify({ detail: 'Instance inst_gone is stopped' }));
    const noRuntime = await upgrade(`/cdp/inst_nort/x?token=${TOKEN}`);
    expect(noRuntime.code).toBe('instance_gone');
    const noRecord = await upgrade(`/cdp/inst_norec/x?token=${TOKEN}`);
    expect(noRecord.code).toBe('instance_gone');
    const paused = await upgrade(`/cdp/inst_paused/x?token=${TOKEN}`);
    expect([paused.status, paused.code]).toEqual(['400', 'instance_not_running']);
    expect(paused.body).toBe(JSON.stringify({ detail: 'Instance inst_paused is paused' }));
    expect(paused.passed).toBeUndefined();
  });

  it('destroys a socket that errors instead of letting the error escape', async () => {
    const r = await upgrade('/cdp/inst_a/x?token=wrong');
    const s = new RecordingSocket();
    handleUpgrade(
      registry,
      { url: `/cdp/inst_hang/x?token=${TOKEN}`, headers: {} } as IncomingMessage,
      s,
      Buffer.alloc(0),
    );
    expect(() => s.emit('error', new Error('ECONNRESET'))).not.toThrow();
    expect(s.destroyed).toBe(true);
    expect(() => r.socket.emit('error', new Error('EPIPE'))).not.toThrow();
  });

  it('refuses with upgrade_timeout an instance that does not answer in time, and only then', async () => {
    vi.useFakeTimers();
    try {
      const silent = new RecordingSocket();
      handleUpgrade(
        registry,
        { url: `/cdp/inst_hang/x?token=${TOKEN}`, headers: {} } as IncomingMessage,
        silent,
        Buffer.alloc(0),
      );
      vi.advanceTimersByTime(UPGRADE_TIMEOUT_MS - 1);
      expect(silent.written).toBe('');
      vi.advanceTimersByTime(1);
      expect(silent.written).toMatch(/^HTTP\/1\.1 504 /);
      expect(silent.written).toMatch(/x-burrow-error: upgrade_timeout/);
      expect(silent.written).toContain(
        `Instance inst_hang did not answer the WebSocket connection within ${UPGRADE_TIMEOUT_MS / 1000} s`,
      );
      vi.advanceTimersByTime(2_000);
      expect(silent.destroyed).toBe(true);
      // an instance that answered (bytes written) is left alone
      const answered = new RecordingSocket();
      handleUpgrade(
        registry,
        { url: `/cdp/inst_hang/x?token=${TOKEN}`, headers: {} } as IncomingMessage,
        answered,
        Buffer.alloc(0),
      );
      Object.defineProperty(answered, 'bytesWritten', { value: 129 });
      vi.advanceTimersByTime(UPGRADE_TIMEOUT_MS + 2_000);
      expect(answered.written).toBe('');
      expect(answered.destroyed).toBe(false);
      answered.destroy();
    } finally {
      vi.useRealTimers();
    }
  });

  it('answers an internal error when the registry fails otherwise', async () => {
    const broken = {
      get() {
        throw new Error('boom');
      },
    } as unknown as Registry;
    const socket = new RecordingSocket();
    handleUpgrade(
      broken,
      { url: '/cdp/inst_a/x?token=t', headers: {} } as IncomingMessage,
      socket,
      Buffer.alloc(0),
    );
    await new Promise((r) => setImmediate(r));
    expect(socket.written).toMatch(/^HTTP\/1\.1 500 /);
    expect(socket.written).toMatch(/x-burrow-error: internal_error/);
  });
});

describe('the instance token of a live-view page', () => {
  const pages: [string, string][] = [];
  const rec: FakeRec = {
    token: TOKEN,
    live: true,
    status: 'running',
    runtime: {
      liveView: {
        url: async () => 'unused',
        page: async (rest, q) => {
          pages.push([rest, q.toString()]);
          return { status: 200, type: 'text/html', body: `<p>${rest}</p>` };
        },
      },
    },
  };
  const registry = fakeRegistry({
    inst_a: rec,
    inst_dead: { ...rec, live: false },
    inst_nort: { ...rec, runtime: {} },
    inst_norec: { token: TOKEN, live: true, status: 'running' },
  });
  let app: FastifyInstance;
  beforeAll(async () => {
    app = Fastify();
    app.setErrorHandler((err: unknown, _req, reply) => {
      if (err instanceof HttpError) {
        return reply.code(err.status).headers(err.responseHeaders).send({ detail: err.detail });
      }
      return reply.code(500).send({ detail: String(err) });
    });
    registerStreamPages(app, registry);
    await app.ready();
  });
  afterAll(() => app.close());

  it('serves the page for the right token, uncached', async () => {
    const res = await app.inject(`/stream/inst_a/vnc.html?token=${TOKEN}&scale=1`);
    expect(res.statusCode).toBe(200);
    expect(res.body).toBe('<p>vnc.html</p>');
    expect(res.headers['content-type']).toMatch(/^text\/html/);
    expect(res.headers['cache-control']).toBe('no-store');
    expect(pages.at(-1)).toEqual(['vnc.html', `token=${TOKEN}&scale=1`]);
  });

  it('refuses every other token with 401, and serves nothing', async () => {
    const before = pages.length;
    for (const q of ['', '?token=', `?token=${TOKEN.toUpperCase()}`, `?token=${TOKEN.slice(1)}`]) {
      const res = await app.inject(`/stream/inst_a/vnc.html${q}`);
      expect(res.statusCode, q).toBe(401);
      expect(res.headers['x-burrow-error']).toBe('token_invalid');
      expect(res.json()).toEqual({ detail: 'Invalid or expired live-view token' });
    }
    expect(pages.length).toBe(before);
  });

  it('answers 404 when the instance has no live view, with the right token only', async () => {
    for (const id of ['inst_dead', 'inst_nort', 'inst_norec']) {
      const res = await app.inject(`/stream/${id}/vnc.html?token=${TOKEN}`);
      expect(res.statusCode).toBe(404);
      expect(res.headers['x-burrow-error']).toBe('live_view_unavailable');
      const wrong = await app.inject(`/stream/${id}/vnc.html?token=x`);
      expect(wrong.statusCode).toBe(401);
    }
  });
});
