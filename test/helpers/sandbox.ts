/** The server-wide sandbox layer for tests that build runtimes without a server. */
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll } from 'vitest';
import { Sandbox, SandboxHost } from '../../src/server/sandbox/index.js';
import type { Logger } from '../../src/server/instances/runtime.js';

const quiet: Logger = { info() {}, warn() {}, error() {}, debug() {} };

/** A SandboxHost for a test run (`runDir` named `run-<pid>-<tag>`, as the server names its own). */
export function testSandboxHost(
  runDir: string,
  opts: { disableIsolation?: boolean; log?: Logger } = {},
): Promise<SandboxHost> {
  return SandboxHost.create({
    runDir,
    log: opts.log ?? quiet,
    ...(opts.disableIsolation && { disableIsolation: true }),
  });
}

/**
 * Real sandboxes for the test file that calls this at its top: a host made before its tests (in a
 * temp dir named after `tag`), and `sandbox()` making one more, each stopped with the host after
 * them.
 */
export function testSandboxes(tag: string): { sandbox(): Promise<Sandbox> } {
  let work: string;
  let host: SandboxHost;
  const boxes: Sandbox[] = [];
  let made = 0;
  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), `burrow-${tag}-`));
    host = await testSandboxHost(join(work, `run-${process.pid}-${tag}`));
  });
  afterAll(async () => {
    await Promise.all(boxes.map((b) => b.stop()));
    await host?.close();
    rmSync(work, { recursive: true, force: true });
  });
  return {
    async sandbox() {
      const name = `${tag}-${process.pid}-${made++}`;
      mkdirSync(join(work, name));
      const box = await Sandbox.create(host, { dir: join(work, name), name, log: quiet });
      boxes.push(box);
      return box;
    },
  };
}
