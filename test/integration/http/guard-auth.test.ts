/**
 * Every credential check of the server, tried with what an attacker sends rather than one wrong
 * value: nothing, an empty value, another case, a prefix or an extension of the secret, the secret
 * in another place (query string, another header, a cookie), two values at once, and another
 * instance's token. The API key guards every API route; the instance token guards `cdp_url`
 * (WebSocket), the live-view page and its WebSocket. Each list has a control that gets in.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { handshakeStatus } from '../../helpers/handshake.js';
import { rawRequest } from '../../helpers/raw-http.js';
import { useServer } from '../../helpers/use-server.js';

const server = useServer({ maxInstances: 3 });
let key: string;
/** Two browser instances: their ids, `cdp_url`s, `stream_url`s and tokens. */
const inst: { id: string; cdp: URL; stream: URL; token: string }[] = [];

beforeAll(async () => {
  key = server.apiKey;
  for (let i = 0; i < 2; i++) {
    const res = await server.api('/v1/start', { json: { instance_type: 'browser' } });
    const { id } = (await res.json()) as { id: string };
    expect(res.status).toBe(200);
    const cdp = new URL(
      (
        (await (await server.api(`/v1/instance/${id}/browser/cdp_url`)).json()) as {
          cdp_url: string;
        }
      ).cdp_url,
    );
    const stream = new URL(
      ((await (await server.api(`/v1/instance/${id}/stream_url`)).json()) as { stream_url: string })
        .stream_url,
    );
    const token = cdp.searchParams.get('token')!;
    expect(token.length).toBeGreaterThan(8);
    inst.push({ id, cdp, stream, token });
  }
});

afterAll(async () => {
  for (const { id } of inst) await server.api(`/v1/instance/${id}/stop`, { method: 'POST' });
});

/** Spellings of the credential `right` that must all fail. */
function wrongKeys(right: string): [string, string][] {
  return [
    ['empty', ''],
    ['upper case', right.toUpperCase()],
    ['lower case', right.toLowerCase()],
    [
      'swapped case',
      [...right].map((c) => (c === c.toUpperCase() ? c.toLowerCase() : c.toUpperCase())).join(''),
    ],
    ['its prefix', right.slice(0, -1)],
    ['one character more', `${right}0`],
    ['a space inside', `${right.slice(0, 4)} ${right.slice(4)}`],
    ['a no-break space after it', `${right}\u00a0`],
    ['percent-encoded space after it', `${right}%20`],
  ].filter(([, v]) => v !== right) as [string, string][]; // a key in one case has fewer spellings
}

describe('the API key', () => {
  /** Routes of each kind: JSON operations, extension routes, MCP. */
  const routes = (): [string, string][] => [
    ['GET', '/v1/instances'],
    ['GET', `/v1/instance/${inst[0]!.id}`],
    ['POST', `/v1/instance/${inst[0]!.id}/stop`],
    ['GET', `/v1/instance/${inst[0]!.id}/downloads`],
    ['GET', '/v1/version'],
    ['POST', '/v1/start'],
    ['POST', '/mcp'],
  ];
  const send = (method: string, path: string, headers: Record<string, string>) =>
    rawRequest(server.url, path, {
      method,
      headers: { 'content-type': 'application/json', 'content-length': '2', ...headers },
      body: '{}',
    });

  it('lets the right key in, under any spelling of the header name (the control)', async () => {
    for (const name of ['x-api-key', 'X-API-KEY', 'X-Api-Key']) {
      expect((await send('GET', '/v1/instances', { [name]: key })).status).toBe(200);
    }
  });

  it('refuses no key, an empty one, another case, a prefix or extension, and lookalikes', async () => {
    for (const [method, path] of routes()) {
      expect((await send(method, path, {})).status, `${method} ${path} without a key`).toBe(401);
      for (const [what, value] of wrongKeys(key)) {
        const res = await send(method, path, { 'x-api-key': value });
        expect(res.status, `${method} ${path}: ${what}`).toBe(401);
      }
    }
  });

  it('refuses the key anywhere but its header, and two keys at once', async () => {
    const ways: [string, string, Record<string, string>][] = [
      ['query x-api-key', `?x-api-key=${key}`, {}],
      ['query api_key', `?api_key=${key}`, {}],
      ['query key', `?key=${key}`, {}],
      ['query token', `?token=${key}`, {}],
      ['bearer', '', { authorization: `Bearer ${key}` }],
      ['basic', '', { authorization: `Basic ${Buffer.from(`:${key}`).toString('base64')}` }],
      ['cookie', '', { cookie: `x-api-key=${key}; api_key=${key}` }],
      ['another header', '', { 'x-api-token': key, 'api-key': key }],
      ['an instance token', '', { 'x-api-key': inst[0]!.token }],
    ];
    for (const [method, path] of routes()) {
      for (const [what, query, headers] of ways) {
        const res = await send(method, `${path}${query}`, headers);
        expect(res.status, `${method} ${path}: ${what}`).toBe(401);
      }
    }
    // a repeated header reaches the server as one joined value, which is no key
    for (const order of [
      ['wrong', key],
      [key, 'wrong'],
      [key, key],
    ]) {
      const head = order.map((v) => `x-api-key: ${v}`).join('\r\n');
      const res = await rawRequest(server.url, '/v1/instances', { headers: {}, extraHead: head });
      expect(res.status, order.join(' then ')).toBe(401);
    }
  });

  it('started nothing and stopped nothing for all those refused requests', async () => {
    const res = await server.api('/v1/instances');
    const list = (await res.json()) as { id: string; status: string }[] | { instances: unknown[] };
    const text = JSON.stringify(list);
    for (const { id } of inst) expect(text).toContain(id);
    const count = (text.match(/"id":"inst_/g) ?? []).length;
    expect(count).toBe(2);
    for (const { id } of inst) {
      const one = (await (await server.api(`/v1/instance/${id}`)).json()) as { status: string };
      expect(one.status).toBe('running');
    }
  });
});

/** `url` with its `token` parameter set to `token`, or removed when undefined. */
function withToken(url: URL, token: string | undefined, raw?: string): URL {
  const u = new URL(url);
  u.searchParams.delete('token');
  if (token !== undefined) u.searchParams.set('token', token);
  if (raw !== undefined) u.search = raw;
  return u;
}

/** Ways to present the instance token that must fail: [what, token, raw query]. */
function wrongTokens(a: (typeof inst)[number], b: (typeof inst)[number]) {
  const t = a.token;
  const out: [string, string | undefined, string?][] = [
    ['no token', undefined],
    ["the other instance's token", b.token],
    ['the API key', key],
    ...wrongKeys(t),
    ['the wrong token first, the right one second', undefined, `?token=${b.token}&token=${t}`],
    ['an empty token first', undefined, `?token=&token=${t}`],
    ['the token under another name', undefined, `?Token=${t}&access_token=${t}`],
  ];
  return out;
}

describe('the instance token', () => {
  it('opens cdp_url and the live view with the right token (the control)', async () => {
    for (const a of inst) {
      expect(await handshakeStatus(a.cdp)).toBe(101);
      expect((await rawRequest(a.stream.origin, a.stream.pathname + a.stream.search)).status).toBe(
        200,
      );
    }
  });

  it('refuses every other cdp_url token, and the right token in a header', async () => {
    const [a, b] = [inst[0]!, inst[1]!];
    for (const [what, token, raw] of wrongTokens(a, b)) {
      expect(await handshakeStatus(withToken(a.cdp, token, raw)), what).toBe(401);
    }
    const bare = withToken(a.cdp, undefined);
    expect(await handshakeStatus(bare, { headers: { 'x-api-key': a.token } })).toBe(401);
    expect(await handshakeStatus(bare, { headers: { authorization: `Bearer ${a.token}` } })).toBe(
      401,
    );
    expect(await handshakeStatus(bare, { headers: { 'x-api-key': key } })).toBe(401); // the API key is not a token
    // b's token on a's path, and a's id under b's token
    expect(await handshakeStatus(new URL(a.cdp.href.replace(a.id, b.id)))).toBe(401);
  });

  it('refuses every other live-view token, on the page, its files and its WebSocket', async () => {
    const [a, b] = [inst[0]!, inst[1]!];
    const ws = new URL(a.stream);
    ws.protocol = 'ws:';
    ws.pathname = `/stream/${a.id}/websockify`;
    for (const [what, token, raw] of wrongTokens(a, b)) {
      const page = withToken(a.stream, token, raw);
      const res = await rawRequest(page.origin, page.pathname + page.search);
      expect(res.status, `page: ${what}`).toBe(401);
      expect(await handshakeStatus(withToken(ws, token, raw)), `websocket: ${what}`).toBe(401);
    }
    const page = withToken(a.stream, undefined);
    for (const headers of [{ 'x-api-key': key }, { cookie: `token=${a.token}` }]) {
      expect((await rawRequest(page.origin, page.pathname, { headers })).status).toBe(401);
    }
  });
});
