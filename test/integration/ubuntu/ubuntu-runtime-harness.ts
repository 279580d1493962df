/**
 * What the ubuntu runtime tests share (ubuntu-runtime-shell, -files and -lifecycle): an instance
 * started directly (no HTTP) in a real sandbox of its own, with a secret in its data dir for the
 * tests to fail to reach, and its stop checked: no process of it left, no failure reported.
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'vitest';
import { alive } from '../../../src/internal/process.js';
import type { RuntimeContext } from '../../../src/server/instances/runtime.js';
import { UbuntuRuntime } from '../../../src/server/ubuntu/index.js';
import { testSandboxHost } from '../../helpers/sandbox.js';
import { instancePids } from '../../helpers/server.js';

const quiet = { info() {}, warn() {}, error() {}, debug() {} };

export interface Instance {
  rt: UbuntuRuntime;
  /** The instance id: unique per instance, so its cgroup (`<pid>.<id>`) and the wrappers that
   * name it (`pgrep -f <id>`) belong to this instance alone. */
  id: string;
  dir: string;
  data: string;
  failures: string[];
}

export async function startInstance(
  opts: { disableIsolation?: boolean } = {},
  resolution: [number, number] = [800, 600],
): Promise<Instance> {
  const id = `ubu-rt-${randomBytes(6).toString('hex')}`;
  const data = mkdtempSync(join(tmpdir(), 'burrow-ubuntu-'));
  const runDir = join(
    data,
    'instances',
    `run-${process.pid}-${Math.random().toString(16).slice(2)}`,
  );
  const dir = join(runDir, id);
  mkdirSync(dir, { recursive: true });
  // something secret in the data dir, next to the instance
  mkdirSync(join(data, 'auth_states'), { recursive: true });
  writeFileSync(join(data, 'auth_states', 'secret.json'), '{"cookie":"s3cret"}');
  const failures: string[] = [];
  const ctx: RuntimeContext = {
    instance: { id, type: 'ubuntu', dir, token: 'tok' },
    plan: { resolution, blockedDomains: [], pooled: false, extensions: [] },
    services: {
      publicUrl: 'http://127.0.0.1:1',
      log: quiet,
      chromiumPath: '/usr/lib/chromium/chromium',
      maxUploadBytes: 1 << 20,
      failed: (r) => failures.push(r),
      sandboxHost: await testSandboxHost(runDir, { disableIsolation: !!opts.disableIsolation }),
    },
  };
  const rt = new UbuntuRuntime(ctx);
  await rt.start();
  return { rt, id, dir, data, failures };
}

/** Stop the instance, then remove its server run's sandbox root and the data dir. */
export async function cleanUp(inst: Instance): Promise<void> {
  try {
    await inst.rt.stop();
    await inst.rt.ctx.services.sandboxHost.close();
  } finally {
    rmSync(inst.data, { recursive: true, force: true });
  }
}

/** The tools of the instance `current()` answers, as the tests in its sandbox call them. */
export function toolsOf(current: () => Instance) {
  return {
    bash: (req: Parameters<UbuntuRuntime['tools']['bash']>[0]) => current().rt.tools.bash(req),
    edit: (req: Parameters<UbuntuRuntime['tools']['edit']>[0]) => current().rt.tools.edit(req),
    file: (req: Parameters<UbuntuRuntime['tools']['file']>[0]) => current().rt.tools.file(req),
    home: () => current().rt.sandbox.hostHome,
  };
}

/** After the tests in a sandbox: stop it; none of its processes may be left, nothing failed. */
export async function stopChecked(inst: Instance | undefined): Promise<void> {
  if (!inst) return;
  try {
    const pids = instancePids(inst.id);
    await inst.rt.stop();
    expect(pids.filter(alive)).toEqual([]);
    expect(instancePids(inst.id)).toEqual([]);
    expect(inst.failures).toEqual([]);
  } finally {
    await cleanUp(inst);
  }
}
