/**
 * The routes a token opens instead of the API key (the live view `/stream/<id>/…`, the hand-off's
 * Done, the CDP relay `/cdp/<id>/…`) answer an id no instance has exactly as a known id with a
 * wrong or missing token (issue 35): the same 401, the same body, the same error code. Whoever
 * holds neither the key nor a token learns nothing of which ids exist.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import {
  instanceProcesses,
  startBrowser,
  testServer,
  type TestServer,
} from '../../helpers/server.js';

let server: TestServer;
let known: string;
const UNKNOWN = 'inst_0123456789abcdef';
beforeAll(async () => {
  server = await testServer();
  ({ id: known } = await startBrowser(server));
  // a pending hand-off: its Done route then has a token that would be right
  const h = await server.api(`/v1/instance/${known}/handoff`, { json: { message: 'Solve it' } });
  expect(h.status).toBe(200);
});
afterAll(async () => {
  await server?.close();
  expect(instanceProcesses()).toEqual([]);
});

interface Answer {
  status: number;
  code: string | undefined;
  body: string;
}

async function answer(res: Response): Promise<Answer> {
  return {
    status: res.status,
    code: res.headers.get('x-burrow-error') ?? undefined,
    body: await res.text(),
  };
}

/** The refusal a WebSocket handshake to `url` gets, as the client reads it. */
function handshake(url: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url);
    ws.once('open', () => {
      ws.close();
      resolve({ status: 101, code: undefined, body: '' });
    });
    ws.once('unexpected-response', (_req, res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => {
        const code = res.headers['x-burrow-error'];
        resolve({ status: res.statusCode ?? 0, code: code as string | undefined, body });
        ws.terminate();
      });
    });
    ws.once('error', reject);
  });
}

const TOKENS = ['', '?token=', '?token=wrong-token-0123456789'];

/** The answers of `ask` for the known and the unknown id, with each token: all the same. */
async function sameForAll(ask: (id: string, query: string) => Promise<Answer>): Promise<Answer> {
  const answers: Answer[] = [];
  for (const id of [known, UNKNOWN]) for (const q of TOKENS) answers.push(await ask(id, q));
  for (const a of answers) expect(a).toEqual(answers[0]);
  return answers[0]!;
}

describe('token routes: an unknown id is a wrong token', () => {
  it("the hand-off's Done", async () => {
    const a = await sameForAll(async (id, q) =>
      answer(await fetch(`${server.url}/stream/${id}/handoff/done${q}`, { method: 'POST' })),
    );
    expect(a.status).toBe(401);
    expect(a.code).toBe('token_invalid');
    expect(JSON.parse(a.body)).toEqual({ detail: expect.stringMatching(/token/) });
  });

  it('the live-view pages', async () => {
    const a = await sameForAll(async (id, q) =>
      answer(await fetch(`${server.url}/stream/${id}/${q}`)),
    );
    expect(a.status).toBe(401);
    expect(a.code).toBe('token_invalid');
    const ws = await sameForAll((id, q) =>
      handshake(`ws://127.0.0.1:${server.port}/stream/${id}/ws${q}`),
    );
    expect(ws.status).toBe(401);
  });

  it('the CDP relay', async () => {
    const a = await sameForAll((id, q) =>
      handshake(`ws://127.0.0.1:${server.port}/cdp/${id}/devtools/browser${q}`),
    );
    expect(a.status).toBe(401);
    expect(a.code).toBe('token_invalid');
    expect(JSON.parse(a.body)).toEqual({ detail: 'Invalid or expired CDP token' });
    // over plain HTTP the API key is asked for, whatever the id
    const plain = await sameForAll(async (id, q) =>
      answer(await fetch(`${server.url}/cdp/${id}/json/version${q}`)),
    );
    expect(plain.status).toBe(401);
  });
});
