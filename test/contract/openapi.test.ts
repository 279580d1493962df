/**
 * The served description of the API: `GET /openapi.json` is a valid OpenAPI 3.1 document (checked
 * by an OpenAPI validator, not by hand), describes every row of the operation table, and what the
 * real server answers matches it (real responses, a real 422 and a real error checked against the
 * document's schemas with a JSON Schema 2020-12 validator). `GET /docs` is a self-contained page
 * that, opened in real Chromium with no network but the server's, sends a request and shows it.
 */
import { Validator } from '@seriousme/openapi-schema-validator';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { operationIds, operations } from '../../src/api/index.js';
import { rawRequest } from '../helpers/raw-http.js';
import { testServer, type TestServer } from '../helpers/server.js';

type Json = Record<string, unknown>;
let server: TestServer;
let doc: Json;
let viewer: Browser;

beforeAll(async () => {
  [server, viewer] = await Promise.all([
    testServer(),
    chromium.launch({
      executablePath: '/usr/lib/chromium/chromium',
      args: ['--no-sandbox', '--disable-background-networking', '--disable-component-update'],
    }),
  ]);
  const res = await fetch(`${server.url}/openapi.json`); // no key
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^application\/json/);
  doc = (await res.json()) as Json;
});

afterAll(async () => {
  await viewer?.close();
  await server?.close();
});

const paths = () => doc.paths as Record<string, Record<string, Json>>;

/** Checks `value` against the document's schema for `op`'s `status` answer. */
function checkAgainst(opPath: string, method: string, status: string, value: unknown) {
  const op = paths()[opPath]![method]!;
  const response = (op.responses as Record<string, Json>)[status]!;
  const schema = (response.content as Record<string, { schema: Json }>)['application/json']!.schema;
  const ajv = new Ajv2020({ strict: false });
  // the component schemas under the same URI the document's `$ref`s point into
  ajv.addSchema({ $id: 'doc', components: doc.components as Json }, 'doc');
  const rewrite = (s: unknown): unknown =>
    JSON.parse(JSON.stringify(s).replaceAll('"#/components/', '"doc#/components/'));
  const validate = ajv.compile(rewrite(schema) as Json);
  const ok = validate(value);
  expect(validate.errors ?? [], `${method} ${opPath} ${status}`).toEqual([]);
  expect(ok).toBe(true);
}

describe('GET /openapi.json', () => {
  it('is a valid OpenAPI 3.1 document', async () => {
    const validator = new Validator();
    const result = await validator.validate(doc);
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
    expect(validator.version).toBe('3.1');
  });

  it('the validator does refuse a broken document', async () => {
    const broken = structuredClone(doc);
    (broken.paths as Record<string, Json>)['/v1/version']!.get = { responses: 'none' };
    expect((await new Validator().validate(broken)).valid).toBe(false);
  });

  it('describes every row of the operation table, extensions marked', () => {
    for (const id of operationIds) {
      const row = operations[id];
      const op = paths()[row.path]?.[row.method.toLowerCase()];
      expect(op, `${row.method} ${row.path}`).toBeDefined();
      expect(op!.operationId).toBe(id);
      expect(op!['x-burrow-extension'] === true).toBe('extension' in row);
    }
    expect(paths()['/v1/version']!.get!['x-burrow-extension']).toBe(true);
    expect(paths()['/v1/start']!.post!['x-burrow-extension']).toBeUndefined();
  });

  it('describes a drain’s 202, as a drained server answers it', async () => {
    const drain = paths()['/v1/node/drain']!.post!;
    expect(drain.operationId).toBe('nodeDrain');
    expect(Object.keys(drain.responses as Json)).toContain('202');
    expect(Object.keys(drain.responses as Json)).not.toContain('200');
    const other = await testServer();
    try {
      const res = await other.api('/v1/node/drain', { method: 'POST' });
      expect(res.status).toBe(202);
      checkAgainst('/v1/node/drain', 'post', '202', await res.json());
      await other.drained;
    } finally {
      await other.close();
    }
  });

  it('names the x-api-key scheme for every /v1 route, none for the public pages', () => {
    const components = doc.components as { securitySchemes: Record<string, Json> };
    expect(components.securitySchemes.apiKey).toEqual(
      expect.objectContaining({ type: 'apiKey', in: 'header', name: 'x-api-key' }),
    );
    expect(doc.security).toEqual([{ apiKey: [] }]);
    expect(paths()['/openapi.json']!.get!.security).toEqual([]);
    expect(paths()['/docs']!.get!.security).toEqual([]);
  });

  it('matches what the server really answers: a record, a list, the version', async () => {
    const started = await server.api('/v1/start', { json: { instance_type: 'ubuntu' } });
    expect(started.status).toBe(200);
    const instance = (await started.json()) as { id: string };
    checkAgainst('/v1/start', 'post', '200', instance);
    const list = await (await server.api('/v1/instances')).json();
    checkAgainst('/v1/instances', 'get', '200', list);
    const env = await (await server.api(`/v1/instance/${instance.id}/env`)).json();
    checkAgainst('/v1/instance/{instance_id}/env', 'get', '200', env);
    const version = await (await server.api('/v1/version')).json();
    checkAgainst('/v1/version', 'get', '200', version);
    await server.api(`/v1/instance/${instance.id}/stop`, { method: 'POST' });
    // and a wrong body fails the same check
    expect(() => checkAgainst('/v1/version', 'get', '200', { burrow: 1 })).toThrow();
  });

  it("describes the server's 422 and its other errors", async () => {
    const bad = await server.api('/v1/start', { json: { timeout_hours: 'soon' } });
    expect(bad.status).toBe(422);
    checkAgainst('/v1/start', 'post', '422', await bad.json());
    const missing = await server.api('/v1/instance/nope');
    expect(missing.status).toBe(404);
    expect(missing.headers.get('x-burrow-error')).toBeTruthy();
    checkAgainst('/v1/instance/{instance_id}', 'get', 'default', await missing.json());
  });

  it('/v1/version needs the key; the description does not', async () => {
    expect((await fetch(`${server.url}/v1/version`)).status).toBe(401);
    expect((await fetch(`${server.url}/openapi.json?x=1`)).status).toBe(200);
    expect((await fetch(`${server.url}/docs`)).status).toBe(200);
    // nothing else slips through with them
    // raw paths, so the server itself receives the `..` (fetch would resolve it first)
    for (const path of [
      '/openapi.json/../v1/instances',
      '/openapi.json/%2e%2e/v1/instances',
      '/openapi.json/..%2fv1%2finstances',
      '/openapi.json%2f..%2fv1/instances',
      '/docs/../v1/instances',
      '/docs/%2E%2E/v1/instances',
      '/openapi.json/../../v1/instances?x=/openapi.json',
    ]) {
      expect((await rawRequest(server.url, path)).status, path).toBe(401);
    }
    expect((await fetch(`${server.url}/docs/x`)).status).toBe(401);
    expect((await fetch(`${server.url}/openapi.json`, { method: 'POST' })).status).toBe(401);
  });
});

describe('GET /docs', () => {
  it('loads nothing from elsewhere, and its CSP would refuse it', async () => {
    const res = await fetch(`${server.url}/docs`);
    const html = await res.text();
    expect(res.headers.get('content-type')).toMatch(/^text\/html/);
    expect(html).not.toMatch(/\b(src|href)="(https?:)?\/\//);
    expect(html).not.toContain('src="./api-page.page.mjs"'); // inlined
    const csp = res.headers.get('content-security-policy') ?? '';
    expect(csp).toContain("default-src 'none'");
    expect(csp).toContain("connect-src 'self'");
    expect(csp).toMatch(/script-src 'sha256-[A-Za-z0-9+/=]+'$|script-src 'sha256-[^;]+;/);
  });

  it('lists the operations and sends one with the key typed in, in real Chromium', async () => {
    const context = await viewer.newContext();
    const outside: string[] = [];
    await context.route('**/*', (route) => {
      const url = route.request().url();
      if (url.startsWith(server.url) || url.startsWith('data:')) return route.continue();
      outside.push(url);
      return route.abort();
    });
    const page = await context.newPage();
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(String(e)));
    // (Chromium logs each non-2xx answer as a console error: the 401 below is one on purpose)
    page.on('console', (m) => {
      if (m.type() === 'error' && !m.text().startsWith('Failed to load resource')) {
        errors.push(m.text());
      }
    });
    await page.goto(`${server.url}/docs`);
    await page.locator('#version').waitFor();
    expect(await page.locator('details.op').count()).toBe(
      Object.values(paths()).flatMap((item) => Object.keys(item)).length,
    );
    await page.fill('#key', server.apiKey);
    const op = page.locator('#version');
    await op.locator('summary').first().click();
    await op.getByRole('button', { name: 'Send' }).click();
    await expect.poll(() => op.locator('pre').first().textContent()).toContain('"chromium"');
    await expect(op.locator('b').first().textContent()).resolves.toMatch(/^200/);
    // a wrong key shows the server's answer, not a broken page
    await page.fill('#key', 'wrong-key-000');
    await op.getByRole('button', { name: 'Send' }).click();
    await expect.poll(() => op.locator('b').first().textContent()).toMatch(/^401/);
    expect(errors).toEqual([]);
    expect(outside).toEqual([]);
    await context.close();
  });
});
