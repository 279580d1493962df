/**
 * The server's one configuration (src/server/config.ts): precedence, checks with messages that
 * say what a right value looks like, a frozen result, and docs/configuration.md kept equal to the
 * table of settings, which in turn must name every option, every variable the server reads and
 * every `burrow serve` flag. Below the composition root no module reads a setting from
 * `process.env`.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SERVE_FLAGS, serveConfig } from '../../src/cli/serve.js';
import {
  ConfigError,
  CLUSTER_KEYS,
  ISOLATION_KEYS,
  OPTION_KEYS,
  resolveServerConfig,
  SETTINGS,
  settingsTable,
  type ServerOptions,
} from '../../src/server/config.js';

const KEY = 'key-0123456789';
const resolve = (options: ServerOptions = {}, env: Record<string, string> = {}) =>
  resolveServerConfig({ apiKey: KEY, ...options }, env);

/** An environment that records every name read from it. */
function recording(values: Record<string, string> = {}) {
  const read = new Set<string>();
  const env = new Proxy(values, {
    get(target, name) {
      if (typeof name === 'string') read.add(name);
      return target[name as string];
    },
  });
  return { env, read };
}

describe('resolveServerConfig', () => {
  it('applies the defaults', () => {
    const c = resolveServerConfig({}, { HOME: '/home/u' }, () => 'generated-key-123');
    expect(c).toMatchObject({
      host: '127.0.0.1',
      port: 8787,
      apiKey: 'generated-key-123',
      apiKeyGenerated: true,
      publicUrl: undefined,
      logLevel: 'warn',
      maxInstances: 8,
      maxUploadBytes: 100 * 2 ** 20,
      maxExtensionBytes: 50 * 2 ** 20,
      maxProfileBytes: 200 * 2 ** 20,
      maxConnectionsPerClient: undefined,
      warmPool: {},
      programs: {
        chromium: '/usr/lib/chromium/chromium',
        chromiumFlags: [],
        xvfb: '/usr/bin/Xvfb',
        x11vnc: '/usr/bin/x11vnc',
      },
      sandbox: { root: '/var/lib/burrow/sandboxes', bwrapPath: undefined, isolation: {} },
      artifacts: { retentionMs: 3_600_000, maxRetainedBytes: 16 * 2 ** 30, maxDownloads: 1000 },
      mcp: { idleMs: 1_800_000, maxSessions: 64 },
    });
    expect(c.dataDir).toMatch(/burrow$/);
  });

  it('takes the option first, then the variable (empty counts as unset)', () => {
    const env = {
      BURROW_HOST: '0.0.0.0',
      BURROW_PORT: '9000',
      BURROW_API_KEY: 'env-key-0123456',
      BURROW_DATA_DIR: '/srv/burrow',
      BURROW_MAX_INSTANCES: '3',
      BURROW_WARM_POOL: 'browser=2,ubuntu=1',
      BURROW_LOG_LEVEL: 'info',
      BURROW_CHROMIUM_FLAGS: ' --a  --b ',
      BURROW_XVFB: '/opt/Xvfb',
      BURROW_MCP_IDLE_SECONDS: '2',
      BURROW_ARTIFACT_RETAIN_MAX_BYTES: '0',
      BURROW_SANDBOX_ROOT: '',
      BURROW_SECRET_KEY_FILE: '/run/k',
    };
    const fromEnv = resolveServerConfig({}, env);
    expect(fromEnv).toMatchObject({
      host: '0.0.0.0',
      port: 9000,
      apiKey: 'env-key-0123456',
      apiKeyGenerated: false,
      dataDir: '/srv/burrow',
      maxInstances: 3,
      warmPool: { browser: 2, ubuntu: 1 },
      logLevel: 'info',
      programs: { chromiumFlags: ['--a', '--b'], xvfb: '/opt/Xvfb' },
      mcp: { idleMs: 2000 },
      artifacts: { maxRetainedBytes: 0 },
      sandbox: { root: '/var/lib/burrow/sandboxes' },
      secretKeys: { env: { BURROW_SECRET_KEY_FILE: '/run/k' } },
    });
    const fromOptions = resolveServerConfig(
      {
        host: '127.0.0.2',
        port: 0,
        apiKey: 'opt-key-0123456',
        maxInstances: 5,
        warmPool: 1,
        chromiumFlags: [],
      },
      env,
    );
    expect(fromOptions).toMatchObject({
      host: '127.0.0.2',
      port: 0,
      apiKey: 'opt-key-0123456',
      maxInstances: 5,
      warmPool: { browser: 1 },
      programs: { chromiumFlags: [] },
    });
  });

  it('refuses bad variables, naming them and the shape of a right value', () => {
    const cases: [Record<string, string>, RegExp][] = [
      [
        { BURROW_WARM_POOL: 'browser=x' },
        /^BURROW_WARM_POOL must be a number of browser instances \(e\.g\. 2\) or sizes per type \(e\.g\. browser=2,ubuntu=1\), not "browser=x": "browser=x" is not TYPE=COUNT/,
      ],
      [{ BURROW_WARM_POOL: 'chrome=2' }, /"chrome" is not an instance type \(browser, ubuntu\)/],
      [{ BURROW_PORT: 'http' }, /^BURROW_PORT must be an integer from 0 to 65535, not "http"$/],
      [{ BURROW_PORT: '70000' }, /BURROW_PORT must be an integer from 0 to 65535/],
      [{ BURROW_MAX_INSTANCES: '0' }, /BURROW_MAX_INSTANCES must be an integer at least 1/],
      [{ BURROW_MAX_UPLOAD_BYTES: '1.5' }, /BURROW_MAX_UPLOAD_BYTES must be an integer/],
      [{ BURROW_MCP_MAX_SESSIONS: 'many' }, /BURROW_MCP_MAX_SESSIONS must be an integer/],
      [{ BURROW_LOG_LEVEL: 'loud' }, /BURROW_LOG_LEVEL must be one of fatal, error, warn/],
      [{ BURROW_ARTIFACT_RETENTION_SECONDS: '-1' }, /BURROW_ARTIFACT_RETENTION_SECONDS must be/],
    ];
    for (const [env, message] of cases) {
      const err = (() => {
        try {
          resolve({}, env);
        } catch (e) {
          return e;
        }
      })();
      expect(err, JSON.stringify(env)).toBeInstanceOf(ConfigError);
      expect((err as Error).message, JSON.stringify(env)).toMatch(message);
    }
  });

  it('refuses bad options, naming the field', () => {
    expect(() => resolve({ port: -1 })).toThrow(/startServer: port:/);
    expect(() => resolve({ warmPool: { chrome: 1 } as never })).toThrow(/warmPool/);
    expect(() => resolve({ isolation: { cpus: 0 } })).toThrow(/isolation\.cpus/);
    expect(() => resolve({ logLevel: 'loud' })).toThrow(/logLevel/);
    expect(() => resolve({ publicUrl: 'ftp://x' })).toThrow(/publicUrl/);
    expect(() => resolve({ bogus: 1 } as never)).toThrow(/bogus/);
    expect(() => resolveServerConfig({ apiKey: 'short' }, {})).toThrow(
      'The API key must be at least 8 characters long',
    );
  });

  it('is frozen all the way down, without freezing what the caller passed', () => {
    const ports = [8080];
    const pool = { browser: 1 };
    const c = resolve({ isolation: { allowHostPorts: ports }, warmPool: pool });
    expect(Object.isFrozen(c)).toBe(true);
    expect(Object.isFrozen(c.programs.chromiumFlags)).toBe(true);
    expect(Object.isFrozen(c.sandbox.isolation.allowHostPorts)).toBe(true);
    expect(Object.isFrozen(c.warmPool)).toBe(true);
    expect(Object.isFrozen(ports) || Object.isFrozen(pool)).toBe(false);
  });
});

describe('the table of settings', () => {
  it('is what docs/configuration.md shows', () => {
    const doc = readFileSync(new URL('../../docs/configuration.md', import.meta.url), 'utf8');
    const section = /<!-- settings:start -->\n([\s\S]*?)\n<!-- settings:end -->/.exec(doc)?.[1];
    expect(section, 'the markers around the table').toBeDefined();
    // cells compared after trimming (a formatter may pad the columns)
    const cells = (table: string) =>
      table
        .trim()
        .split('\n')
        .filter((line) => !/^\|[\s|:-]+\|$/.test(line))
        .map((line) =>
          line
            .slice(1, -1)
            .split(/(?<!\\)\|/)
            .map((c) => c.trim()),
        );
    expect(cells(section!)).toEqual(cells(settingsTable()));
  });

  it('has a row for every option, isolation option and serve flag, and no other', () => {
    const options = SETTINGS.map((s) => s.option).filter((o) => o !== '-');
    const expected = [
      ...OPTION_KEYS.filter((k) => k !== 'isolation' && k !== 'cluster'),
      ...ISOLATION_KEYS.map((k) => `isolation.${k}`),
      ...CLUSTER_KEYS.map((k) => `cluster.${k}`),
    ];
    expect([...options].sort()).toEqual([...expected].sort());
    const flags = SETTINGS.flatMap((s) => s.flags ?? []);
    const serveFlags = Object.keys(SERVE_FLAGS)
      .filter((f) => f !== 'help')
      .map((f) => `--${f}`);
    expect([...flags].sort()).toEqual(serveFlags.sort());
  });

  it('names every variable the server and serve read, and only those', async () => {
    const server = recording();
    resolveServerConfig({}, server.env, () => 'generated-key-123');
    const serve = recording();
    await serveConfig([], serve.env);
    const read = [...server.read, ...serve.read].filter((n) => n.startsWith('BURROW_'));
    const documented = SETTINGS.flatMap((s) => (s.env ? [s.env] : []));
    expect([...new Set(read)].sort()).toEqual([...new Set(documented)].sort());
  });
});

describe('the rooms below the composition root', () => {
  it('read no setting from process.env (a child process environment aside)', () => {
    const root = new URL('../../src/server/', import.meta.url).pathname;
    const files = (dir: string): string[] =>
      readdirSync(dir).flatMap((name) => {
        const path = join(dir, name);
        if (statSync(path).isDirectory()) return files(path);
        return path.endsWith('.ts') ? [path] : [];
      });
    const reads: string[] = [];
    for (const file of files(root)) {
      const rel = file.slice(root.length);
      if (rel === 'index.ts' || rel === 'config.ts') continue; // the root and the config itself
      readFileSync(file, 'utf8')
        .split('\n')
        .forEach((line, i) => {
          if (/^\s*(\*|\/\/)/.test(line) || !line.includes('process.env')) return;
          // Chromium's environment is built from the server's PATH and LANG (chromium.ts)
          if (/process\.env\.(PATH|LANG)\b/.test(line)) return;
          reads.push(`${rel}:${i + 1}: ${line.trim()}`);
        });
    }
    expect(reads).toEqual([]);
  });
});
