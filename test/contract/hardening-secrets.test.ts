/**
 * Where the server's secrets go: the API key never reaches a log line, wherever a client puts it;
 * `burrow serve` reads key files strictly and checks its isolation flags; the auth store sweeps
 * the temp files of a killed write. Each test starts what it needs (no shared server).
 */
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, describe, expect, it } from 'vitest';
import { serveConfig } from '../../src/cli/serve.js';
import { buildApp, createLogger } from '../../src/server/http/app.js';
import { AuthStore } from '../../src/server/auth-states/store.js';
import { Registry } from '../../src/server/instances/registry.js';
import type { SandboxHost } from '../../src/server/sandbox/index.js';
import { testServer } from '../helpers/server.js';

describe('the API key in logs', () => {
  it('never appears in a log line, wherever a client puts it', async () => {
    const key = 'bk_Lo"g\\key+/=0123456789';
    const lines: string[] = [];
    const stream = new PassThrough();
    stream.on('data', (d: Buffer) => lines.push(...d.toString().split('\n').filter(Boolean)));
    const logger = createLogger('trace', { secrets: [key], destination: stream });
    const dir = mkdtempSync(join(tmpdir(), 'burrow-log-'));
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
    const app = await buildApp({
      apiKey: key,
      registry,
      authStore: new AuthStore(dir),
      maxUploadBytes: 1024,
      logger,
    });
    try {
      const base = await app.listen({ host: '127.0.0.1', port: 0 });
      const enc = encodeURIComponent(key);
      const calls: [string, Record<string, string>][] = [
        [`/v1/instances?api_key=${enc}&limit=1`, { 'x-api-key': key }],
        [`/v1/instances?key=${enc}`, {}],
        [`/v1/instances?token=abc123&password=hunter2&client_secret=s3&q=ok`, { 'x-api-key': key }],
        [`/v1/instances?anything=${enc}`, { authorization: `Bearer ${key}` }],
        [`/v1/instance/${enc}`, { 'x-api-key': key }],
        [`/v1/instance/${enc}/bash`, { 'x-api-token': key, cookie: `k=${key}` }],
        [`/v1/nothing?sig=${enc}`, { 'x-api-key': 'wrong-key-0000' }],
      ];
      for (const [path, headers] of calls) {
        const res = await fetch(base + path, { headers });
        await res.arrayBuffer();
      }
      const bad = await fetch(`${base}/v1/instance/${enc}/bash?api_key=${enc}`, {
        method: 'POST',
        headers: { 'x-api-key': key, 'content-type': 'application/json' },
        body: `{"command": "${key.replaceAll('\\', '\\\\').replaceAll('"', '\\"')}", }`,
      });
      await bad.arrayBuffer();
      // what libraries log at trace level (multipart logs the request headers) and errors
      logger.trace({ busboyOptions: { headers: { 'x-api-key': key, 'x-other': key } } }, 'opts');
      logger.error({ err: new Error(`refused ${key}`) }, `key ${encodeURIComponent(key)}`);
    } finally {
      await app.close();
      rmSync(dir, { recursive: true, force: true });
    }
    await sleep(50);
    const all = lines.join('\n');
    expect(lines.length).toBeGreaterThan(10); // requests were logged
    for (const form of [key, encodeURIComponent(key), JSON.stringify(key).slice(1, -1)]) {
      expect(all).not.toContain(form);
    }
    expect(all).not.toContain('hunter2');
    const urls = lines.map((l) => (JSON.parse(l) as { req?: { url?: string } }).req?.url ?? '');
    expect(urls).toContain('/v1/instances?api_key=[redacted]&limit=1');
    expect(urls).toContain(
      '/v1/instances?token=[redacted]&password=[redacted]&client_secret=[redacted]&q=ok',
    );
    expect(urls).toContain('/v1/instances?anything=[redacted]');
    expect(urls).toContain('/v1/instance/[redacted]');
  });
});

describe('auth store temp files', () => {
  it('temp files of a killed write are swept when the store opens; committed states stay', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'burrow-auth-'));
    const dir = join(dataDir, 'auth-states');
    mkdirSync(dir, { recursive: true });
    const id = 'auth_0123456789abcdef';
    const committed = JSON.stringify({
      id,
      name: 'kept',
      created_at: '2026-01-01T00:00:00.000Z',
      updated_at: '2026-01-01T00:00:00.000Z',
      data: { cookies: [], origins: [] },
    });
    writeFileSync(join(dir, `${id}.json`), committed, { mode: 0o600 });
    const orphans = [
      `.${id}.json.a1b2c3d4e5f6.tmp`, // an overwrite that never committed
      '.auth_fedcba9876543210.json.000000000000.tmp', // a new state cut short
    ];
    writeFileSync(join(dir, orphans[0]!), '{"id": "auth_0123456789abcdef", "name": "half');
    writeFileSync(join(dir, orphans[1]!), '');
    const unrelated = ['.keep', 'notes.tmp', '.auth_x.json.nothex.tmp'];
    for (const f of unrelated) writeFileSync(join(dir, f), 'mine');
    try {
      const s = await testServer({ dataDir });
      try {
        expect(readdirSync(dir).sort()).toEqual([`${id}.json`, ...unrelated].sort());
        // the committed (0.1, plaintext) state is kept, re-encrypted in place at the start
        const onDisk = readFileSync(join(dir, `${id}.json`), 'utf8');
        expect(onDisk).not.toBe(committed);
        expect(onDisk).not.toContain('kept');
        const res = await s.api('/v1/auth_states');
        expect(await res.json()).toEqual([{ id, name: 'kept' }]);
      } finally {
        await s.close();
      }
      // and a store opened directly does the same
      writeFileSync(join(dir, orphans[1]!), '{');
      expect(new AuthStore(dataDir).list()).toEqual([{ id, name: 'kept' }]);
      expect(readdirSync(dir)).not.toContain(orphans[1]);
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});

describe('burrow serve options', () => {
  const dir = mkdtempSync(join(tmpdir(), 'burrow-serve-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const file = (name: string, text: string) => {
    const p = join(dir, name);
    writeFileSync(p, text, { mode: 0o600 });
    return p;
  };

  it('reads the key from --api-key-file or BURROW_API_KEY_FILE, trailing newline stripped', async () => {
    const p = file('key', 'from-file-key-0123\n');
    expect((await serveConfig(['--api-key-file', p], {}))?.options.apiKey).toBe(
      'from-file-key-0123',
    );
    const crlf = file('crlf', 'crlf-key-0123456\r\n');
    expect((await serveConfig([], { BURROW_API_KEY_FILE: crlf }))?.options.apiKey).toBe(
      'crlf-key-0123456',
    );
    expect((await serveConfig([], { BURROW_API_KEY_FILE: crlf }))?.generated).toBe(false);
    expect((await serveConfig([], {}))?.generated).toBe(true);
  });

  it('precedence: --api-key, --api-key-file, BURROW_API_KEY, BURROW_API_KEY_FILE', async () => {
    const p = file('key2', 'file-key-0123456');
    const envFile = file('key3', 'env-file-key-0123');
    const env = { BURROW_API_KEY: 'env-key-0123456' };
    expect((await serveConfig(['--api-key-file', p], env))?.options.apiKey).toBe(
      'file-key-0123456',
    );
    expect((await serveConfig([], env))?.options.apiKey).toBe('env-key-0123456');
    expect(
      (await serveConfig(['--api-key', 'flag-key-0123456'], { BURROW_API_KEY_FILE: envFile }))
        ?.options.apiKey,
    ).toBe('flag-key-0123456');
    await expect(serveConfig(['--api-key', 'a', '--api-key-file', p], {})).rejects.toThrow(
      /not both/,
    );
    await expect(
      serveConfig([], { BURROW_API_KEY: 'x', BURROW_API_KEY_FILE: envFile }),
    ).rejects.toThrow(/not both/);
  });

  it('clear errors for a key file that is missing, empty or not one line, without its content', async () => {
    await expect(serveConfig(['--api-key-file', join(dir, 'missing')], {})).rejects.toThrow(
      /--api-key-file: cannot read .*missing \(ENOENT\)/,
    );
    await expect(serveConfig([], { BURROW_API_KEY_FILE: file('empty', '\n') })).rejects.toThrow(
      /BURROW_API_KEY_FILE: .*empty is empty/,
    );
    const twoLines = file('two', 'secret-line-one\nsecret-line-two\n');
    const err = await serveConfig(['--api-key-file', twoLines], {}).catch((e: Error) => e);
    expect(String(err)).toMatch(/one line/);
    expect(String(err)).not.toContain('secret-line');
    await expect(serveConfig(['--api-key-file', dir], {})).rejects.toThrow(/cannot read/);
  });

  it('the database URL: --cluster without a password, --cluster-url-file, BURROW_DATABASE_URL', async () => {
    const bare = 'postgres://burrow@db.test:5432/burrow';
    expect((await serveConfig(['--cluster', bare], {}))?.options.cluster).toEqual({
      databaseUrl: bare,
    });
    const withPw = 'postgres://burrow:s3cret-pw@db.test:5432/burrow';
    const p = file('url', `${withPw}\n`);
    expect(
      (await serveConfig(['--cluster-url-file', p, '--node-name', 'n1'], {}))?.options.cluster,
    ).toEqual({ databaseUrl: withPw, nodeName: 'n1' });
    // the variable becomes the option, so that serve can take it out of the environment
    expect((await serveConfig([], { BURROW_DATABASE_URL: withPw }))?.options.cluster).toEqual({
      databaseUrl: withPw,
    });
    for (const url of [
      withPw,
      'postgresql://burrow@db.test/burrow?password=s3cret-pw',
      'postgres://burrow@db.test/burrow?sslmode=require&PASSWORD=s3cret-pw',
    ]) {
      const err = await serveConfig(['--cluster', url], {}).catch((e: Error) => e);
      expect(String(err), url).toMatch(
        /--cluster: the URL holds a password.*--cluster-url-file.*BURROW_DATABASE_URL/,
      );
      expect(String(err)).not.toContain('s3cret');
    }
    await expect(serveConfig(['--cluster', bare, '--cluster-url-file', p], {})).rejects.toThrow(
      /not both/,
    );
    const notPg = file('not-pg', 'mysql://root:s3cret-pw@db.test/x');
    const err = await serveConfig(['--cluster-url-file', notPg], {}).catch((e: Error) => e);
    expect(String(err)).toMatch(/--cluster-url-file: expected a postgres:\/\/ URL/);
    expect(String(err)).not.toContain('s3cret');
    await expect(serveConfig(['--node-name', 'n1'], {})).rejects.toThrow(/need --cluster/);
  });

  it('isolation flags and the connection cap are parsed and checked', async () => {
    const config = await serveConfig(
      [
        '--instance-memory',
        '2g',
        '--instance-disk',
        '512M',
        '--instance-pids',
        '1024',
        '--instance-cpus',
        '1.5',
        '--allow-host-port',
        '8080',
        '--allow-host-port',
        '5432',
        '--allow-host-port',
        '8080',
        '--allow-host-loopback',
        '--insecure-no-isolation',
        '--max-connections-per-client',
        '0',
      ],
      {},
    );
    expect(config?.options.isolation).toEqual({
      allowHostLoopback: true,
      allowHostPorts: [8080, 5432],
      insecureNoIsolation: true,
      allowUnlimited: false, // a server for others: only with --allow-unlimited
      memoryBytes: 2 * 1024 ** 3,
      pids: 1024,
      cpus: 1.5,
      diskBytes: 512 * 1024 ** 2,
    });
    expect(config?.options).toMatchObject({ maxConnectionsPerClient: 0 });
    expect((await serveConfig([], {}))?.options.isolation).toEqual({ allowUnlimited: false });
    for (const [argv, message] of [
      [['--allow-host-port', '0'], /--allow-host-port must be an integer from 1 to 65535/],
      [['--allow-host-port', '70000'], /--allow-host-port/],
      [['--allow-host-port', 'http'], /--allow-host-port/],
      [['--instance-memory', '2x'], /--instance-memory must be a size/],
      [['--instance-memory', '0'], /--instance-memory/],
      [['--instance-disk', ''], /--instance-disk/],
      [['--instance-pids', '1.5'], /--instance-pids must be an integer/],
      [['--instance-cpus', '0'], /--instance-cpus must be a number of cores/],
      [['--instance-cpus', 'many'], /--instance-cpus/],
      [['--max-connections-per-client', '-1'], /--max-connections-per-client/],
      [['--port', '65536'], /--port/],
    ] as const) {
      await expect(serveConfig([...argv], {}), argv.join(' ')).rejects.toThrow(message);
    }
  });
});
