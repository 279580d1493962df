import { afterEach, describe, expect, it, vi } from 'vitest';
import { operationIds, operations } from '../../src/api/index.js';
import {
  APIError,
  Burrow,
  BurrowError,
  ConfigurationError,
  InvalidRequestError,
  NotFoundError,
  RateLimitError,
  ServerError,
  type ValidationError,
} from '../../src/client/index.js';
import { DEFAULT_BASE_URL, encodePathParam } from '../../src/client/core.js';

afterEach(() => {
  vi.unstubAllEnvs();
});

function construct(options: ConstructorParameters<typeof Burrow>[0]): unknown {
  try {
    return new Burrow(options);
  } catch (error) {
    return error;
  }
}

describe('new Burrow()', () => {
  it('without a key anywhere → ConfigurationError missing_api_key', () => {
    vi.stubEnv('BURROW_API_KEY', '');
    const error = construct({});
    expect(error).toBeInstanceOf(ConfigurationError);
    expect(error).toBeInstanceOf(BurrowError);
    expect(error).toMatchObject({ code: 'missing_api_key' });
    expect((error as Error).message).toContain('BURROW_API_KEY');
  });

  it('reads BURROW_API_KEY and BURROW_BASE_URL; options win over the environment', async () => {
    vi.stubEnv('BURROW_API_KEY', 'env-key');
    vi.stubEnv('BURROW_BASE_URL', 'https://burrow.example.com/api/');
    const fromEnv = new Burrow();
    expect(fromEnv.baseUrl).toBe('https://burrow.example.com/api');
    const explicit = new Burrow({ baseUrl: 'http://10.0.0.1:9000' });
    expect(explicit.baseUrl).toBe('http://10.0.0.1:9000');
    await Promise.all([fromEnv.close(), explicit.close()]);
  });

  it('defaults to the local server', async () => {
    vi.stubEnv('BURROW_BASE_URL', '');
    const burrow = new Burrow({ apiKey: 'k' });
    expect(burrow.baseUrl).toBe(DEFAULT_BASE_URL);
    expect(DEFAULT_BASE_URL).toBe('http://127.0.0.1:8787');
    await burrow.close();
  });

  it.each([
    { baseUrl: 'not a url' },
    { baseUrl: 'ftp://host' },
    { timeoutMs: 0 },
    { timeoutMs: 1.5 },
    { timeoutMs: 2 ** 31 },
    { maxRetries: -1 },
    { maxRetries: 0.5 },
  ])('rejects %j with invalid_option', (options) => {
    expect(construct({ apiKey: 'k', ...options })).toMatchObject({ code: 'invalid_option' });
  });

  it('has a method for every row of the operation table, and nothing else', async () => {
    const burrow = new Burrow({ apiKey: 'k' });
    const groups = burrow as unknown as Record<string, Record<string, unknown>>;
    for (const id of operationIds) {
      const [group, method] = operations[id].client;
      expect(typeof groups[group]?.[method], `${group}.${method}`).toBe('function');
    }
    const resources = Object.keys(burrow).filter((key) => typeof groups[key] === 'object');
    const methods = resources.flatMap((group) => {
      const proto = Object.getPrototypeOf(groups[group]) as object;
      return Object.getOwnPropertyNames(proto)
        .filter((name) => name !== 'constructor')
        .map((name) => `${group}.${name}`);
    });
    expect(methods.sort()).toEqual(
      operationIds.map((id) => operations[id].client.join('.')).sort(),
    );
    await burrow.close();
  });
});

describe('encodePathParam', () => {
  it('percent-encodes everything that is not unreserved, "/" included', () => {
    expect(encodePathParam('op', 'id', 'abc-123_X.~')).toBe('abc-123_X.~');
    expect(encodePathParam('op', 'id', 'a/b')).toBe('a%2Fb');
    expect(encodePathParam('op', 'id', '../etc')).toBe('..%2Fetc');
    expect(encodePathParam('op', 'id', 'a?b#c d%')).toBe('a%3Fb%23c%20d%25');
    expect(encodePathParam('op', 'id', 'é')).toBe('%C3%A9');
    expect(encodePathParam('op', 'id', '...')).toBe('...');
  });

  it.each(['', '.', '..', undefined, 5])('rejects %j with InvalidRequestError', (value) => {
    expect(() => encodePathParam('instances.get', 'instance_id', value)).toThrow(
      InvalidRequestError,
    );
    expect(() => encodePathParam('instances.get', 'instance_id', value)).toThrow(
      "instances.get: invalid request: path.instance_id: Must be a non-empty string other than '.' and '..'",
    );
  });
});

describe('APIError.from', () => {
  const init = (status: number) => ({
    status,
    headers: {},
    body: { detail: [{ loc: ['body', 'x'], msg: 'Field required', type: 'missing' }] },
    method: 'POST',
    path: '/v1/start',
    retryAfterMs: 1000,
  });

  it('picks the subclass for the status', () => {
    expect(APIError.from(init(404))).toBeInstanceOf(NotFoundError);
    expect(APIError.from(init(429))).toBeInstanceOf(RateLimitError);
    expect(APIError.from(init(429)).retryAfterMs).toBe(1000);
    expect(APIError.from(init(599))).toBeInstanceOf(ServerError);
    expect(Object.getPrototypeOf(APIError.from(init(418)))).toBe(APIError.prototype);
  });

  it('ValidationError.detail is the parsed list, or empty when the body has none', () => {
    expect((APIError.from(init(422)) as ValidationError).detail).toEqual([
      { loc: ['body', 'x'], msg: 'Field required', type: 'missing' },
    ]);
    const bare = APIError.from({ ...init(422), body: 'oops' }) as ValidationError;
    expect(bare.detail).toEqual([]);
    expect(bare.message).toBe('POST /v1/start failed with status 422: oops');
  });
});
