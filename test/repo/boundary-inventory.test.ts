/**
 * Keeps the boundary inventory in src/server/sandbox/ISOLATION.md complete: every place in the
 * server that starts a process, reads a child's output, connects or listens, touches an
 * instance's disk on the host or signals a process is a channel across the boundary, and must
 * be named by a row of the inventory for that kind of channel. A channel added later without a
 * row fails here; so does a row naming a file or a test that does not exist.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const root = resolve(import.meta.dirname, '../..');
const serverDir = join(root, 'src/server');
const doc = readFileSync(join(serverDir, 'sandbox/ISOLATION.md'), 'utf8');

/** What makes a line of server code a channel of each kind. */
const KINDS: Record<string, RegExp> = {
  // a process the server starts (inside an instance or on its behalf)
  process:
    /\bnew Supervised\(|\bspawn(Sync)?\(|\bexecFile(Sync)?\(|\.exec\(\s*\[|\bsandbox\.spawn\(|\bconnectInside\(/,
  // bytes a child process or an instance sends the server
  stream: /\.(stdout|stderr)\b|\bstdio\[\d|\.on\('message'|\bcreateInterface\(/,
  // a socket to, from or inside an instance
  socket: /\.listen\(|\bconnectInside\(|\bcreateConnection\(|\bnet\.connect\(|\bnew Socket\(/,
  // a path on an instance's disk, opened or changed by the server
  path: /\bhost(Home|Tmp|Shm)\b|\bdiskDir\b|O_NOFOLLOW/,
  // a signal or a freeze sent to a process
  signal: /\bprocess\.kill\(|\bsignalProcess\(|\bsignalGroup\(|\.freeze\(\)/,
};

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return sources(path);
    return /\.(ts|mjs)$/.test(name) ? [path] : [];
  });
}

/** Rows of the inventory: the cells of each table row under "## The boundary". */
function inventory(): { kind: string; where: string; tests: string }[] {
  const section = doc.slice(doc.indexOf('## The boundary'));
  const end = section.indexOf('\n## ', 5);
  const table = (end > 0 ? section.slice(0, end) : section)
    .split('\n')
    .filter((l) => l.startsWith('|') && !/^\|\s*-/.test(l));
  return table.slice(1).map((line) => {
    const cells = line.split('|').map((c) => c.trim());
    return { kind: cells[2] ?? '', where: cells[3] ?? '', tests: cells[5] ?? '' };
  });
}

describe('the boundary inventory (ISOLATION.md)', () => {
  const rows = inventory();

  it('has rows', () => {
    expect(rows.length).toBeGreaterThan(15);
  });

  it('names, for every channel in the server code, the file under the kind it belongs to', () => {
    const missing: string[] = [];
    for (const file of sources(serverDir)) {
      const rel = relative(serverDir, file);
      const text = readFileSync(file, 'utf8');
      for (const [kind, pattern] of Object.entries(KINDS)) {
        const line = text.split('\n').find((l) => pattern.test(l) && !/^\s*(\*|\/\/)/.test(l));
        if (!line) continue;
        const named = rows.some((r) => r.kind.includes(kind) && r.where.includes(`\`${rel}\``));
        if (!named) missing.push(`${rel} (${kind}): ${line.trim()}`);
      }
    }
    expect(missing, 'channels without a row in the inventory').toEqual([]);
  });

  // A Node IPC channel carries descriptors and messages the runtime acts on (a malformed handle
  // message aborts the process), and every process of an instance is the instance's to rewrite
  // (/proc/N/mem): no process of an instance has one. Only the listen step, on the root side of
  // a chain (it joins the instance's network namespace alone), hands the egress socket over one.
  it('gives no process of an instance a Node IPC channel, only the root-side listen step', () => {
    const users = sources(serverDir).flatMap((file) =>
      readFileSync(file, 'utf8')
        .split('\n')
        .filter((l) => l.includes("'ipc'") && !/^\s*(\*|\/\/)/.test(l))
        .map((l) => `${relative(serverDir, file)}: ${l.trim()}`),
    );
    expect(users).toEqual([
      // the listen step, on the root side of a chain
      "sandbox/listen.ts: const proc = network.enter(['ignore', 'ignore', 'pipe', 'ipc'], (namespaces, tools) => [",
      // Sandbox.spawn refusing one
      "sandbox/sandbox.ts: if (Array.isArray(stdio) && stdio.includes('ipc')) throw new Error('spawn: no IPC channel');",
    ]);
  });

  it('names only files and tests that exist', () => {
    for (const row of rows) {
      for (const [, file] of row.where.matchAll(/`([^`]+\.(?:ts|mjs|py))`/g)) {
        expect(existsSync(join(serverDir, file!)), `${file} in ${row.where}`).toBe(true);
      }
      const tests = [...row.tests.matchAll(/`(test\/[^`]+\.test\.ts)`/g)].map((m) => m[1]!);
      expect(tests.length, `a test for ${row.where}`).toBeGreaterThan(0);
      for (const test of tests) expect(existsSync(join(root, test)), test).toBe(true);
    }
  });
});
