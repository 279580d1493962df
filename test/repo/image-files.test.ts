/**
 * The image's files agree with the rest of the checkout: the Containerfile installs every Debian
 * package scripts/setup.sh installs for the server, runs the server under tini with its data in the
 * volume and a health check on a route that needs no key, and never puts the API key on a command
 * line; compose.yaml gives the same privileges and volume. (scripts/image.ts builds and runs the
 * image for real; this only keeps the files in step when one of them changes.)
 */
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { operations } from '../../src/api/operations.js';

const root = resolve(import.meta.dirname, '../..');
const containerfile = readFileSync(join(root, 'Containerfile'), 'utf8');
const compose = readFileSync(join(root, 'compose.yaml'), 'utf8');
const setup = readFileSync(join(root, 'scripts/setup.sh'), 'utf8');
/** Instructions of the Containerfile with their continuation lines joined, comments dropped. */
const instructions = containerfile
  .split('\n')
  .filter((l) => !/^\s*#/.test(l))
  .join('\n')
  .replace(/\\\n/g, ' ')
  .split('\n')
  .filter((l) => l.trim());
const stages = instructions.join('\n').split(/^FROM /m);
const runtime = stages[stages.length - 1]!;

/** The packages setup.sh installs (`need pkg`), without those it installs for the tests. */
const TEST_ONLY = new Set([
  'libcap2-bin',
  'curl',
  'openssl',
  'procps',
  'tinyproxy',
  'microsocks',
  'postgresql',
]);
const serverPackages = [
  ...new Set([...setup.matchAll(/\bneed ([a-z0-9][a-z0-9.+-]+)/g)].map((m) => m[1]!)),
].filter((p) => p !== 'pkg' && !TEST_ONLY.has(p));

function aptInstalled(stage: string): Set<string> {
  const words = [...stage.matchAll(/apt-get install ([^&]*)/g)].flatMap((m) => m[1]!.split(/\s+/));
  return new Set(words.filter((w) => w && !w.startsWith('-')));
}

describe('Containerfile', () => {
  it('finds setup.sh packages (sanity check of this test)', () => {
    expect(serverPackages).toContain('chromium');
    expect(serverPackages).toContain('python3-ipykernel');
    expect(serverPackages.length).toBeGreaterThan(10);
  });

  it('installs in its runtime stage every package setup.sh installs for the server, and tini and nodejs', () => {
    const installed = aptInstalled(runtime);
    const missing = [...serverPackages, 'tini', 'nodejs'].filter((p) => !installed.has(p));
    expect(missing).toEqual([]);
  });

  it('builds on a Debian 13 base given as a build argument', () => {
    expect(instructions[0]).toMatch(/^ARG BASE=\S*debian:trixie/);
    expect(stages.slice(1).every((s) => s.startsWith('${BASE}'))).toBe(true);
  });

  it('runs `burrow serve` under tini, listening on all interfaces, data in the volume', () => {
    expect(runtime).toMatch(/^ENTRYPOINT \["tini", "--"\]$/m);
    expect(runtime).toMatch(/^CMD \["burrow", "serve"\]$/m);
    expect(runtime).toMatch(/BURROW_HOST=0\.0\.0\.0/);
    const volume = /^VOLUME (\S+)$/m.exec(runtime)?.[1];
    expect(volume).toBeDefined();
    for (const v of ['BURROW_DATA_DIR', 'BURROW_SANDBOX_ROOT']) {
      expect(new RegExp(`${v}=(\\S+)`).exec(runtime)?.[1]?.startsWith(`${volume}/`)).toBe(true);
    }
  });

  it('runs as a normal user who owns the volume and has a subordinate uid and gid range', () => {
    const users = [...runtime.matchAll(/^USER (\S+)$/gm)].map((m) => m[1]);
    expect(users.at(-1)).toBe('burrow');
    const volume = /^VOLUME (\S+)$/m.exec(runtime)?.[1];
    expect(runtime).toMatch(new RegExp(`useradd .*--home-dir ${volume} .*burrow`));
    expect(runtime).toMatch(new RegExp(`chown burrow:burrow ${volume}`));
    expect(runtime).toMatch(/burrow:\d+:65536' > \/etc\/subuid/);
    expect(runtime).toMatch(/burrow:\d+:65536' > \/etc\/subgid/);
    expect(aptInstalled(runtime).has('uidmap')).toBe(true);
  });

  it('never passes the API key as an argument', () => {
    expect(containerfile).not.toMatch(/--api-key\b(?!-file)/);
  });

  it('checks health on a route that answers without the key', () => {
    const check = /^HEALTHCHECK .*CMD (.*)$/m.exec(runtime)?.[1];
    expect(check).toBeDefined();
    const path = /127\.0\.0\.1:\$\{process\.env\.BURROW_PORT\}(\/[\w./-]+)/.exec(check!)?.[1];
    expect(path).toBe('/openapi.json');
    // the operation table holds the routes behind the key; the health route must not be one
    expect(Object.values(operations).map((o) => o.path)).not.toContain(path);
  });
});

describe('compose.yaml', () => {
  it('builds the Containerfile, publishes on loopback, and gives the root level its privileges', () => {
    expect(compose).toMatch(/dockerfile: Containerfile/);
    expect(compose).toMatch(/^\s+user: root/m);
    expect(compose).toMatch(/^\s+privileged: true/m);
    expect(compose).toMatch(/^\s+cgroup: private/m);
    expect(compose).toMatch(/- '127\.0\.0\.1:8787:8787'/);
  });

  it('keeps the data in a named volume at the image’s VOLUME, the key in a secret file', () => {
    const volume = /^VOLUME (\S+)$/m.exec(runtime)?.[1];
    expect(compose).toContain(`- burrow-data:${volume}`);
    expect(compose).toMatch(/^volumes:\n\s+burrow-data:/m);
    expect(compose).toMatch(/BURROW_API_KEY_FILE: \/run\/secrets\/burrow_api_key/);
    expect(compose).not.toMatch(/BURROW_API_KEY:/);
  });
});
