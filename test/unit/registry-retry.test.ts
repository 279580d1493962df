/**
 * A cold start that fails is retried once with a fresh instance (src/server/instances/starts.ts,
 * START_ATTEMPTS); a second failure is answered with its reason. The runtimes here are stand-ins:
 * a process killed at exactly the moment an instance comes up cannot be produced on demand, which
 * is the fault this injects.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { planStart } from '../../src/server/instances/plan.js';
import { Registry } from '../../src/server/instances/registry.js';
import type { InstanceRuntime, RuntimeFactory } from '../../src/server/instances/runtime.js';
import type { SandboxHost } from '../../src/server/sandbox/index.js';

const dir = mkdtempSync(join(tmpdir(), 'burrow-retry-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const quiet = { info() {}, warn() {}, error() {}, debug() {} } as never;

/** A factory whose runtimes fail to start with `failures` in turn, then start. */
function factory(failures: string[]): {
  make: RuntimeFactory;
  started: string[];
  stopped: string[];
} {
  const started: string[] = [];
  const stopped: string[] = [];
  const make: RuntimeFactory = (ctx) => {
    const failure = failures.shift();
    const runtime: InstanceRuntime = {
      start: async () => {
        if (failure) throw new Error(failure);
        started.push(ctx.instance.id);
      },
      stop: async () => {
        stopped.push(ctx.instance.id);
      },
      pause: async () => {},
      resume: async () => {},
    };
    return runtime;
  };
  return { make, started, stopped };
}

function registry(make: RuntimeFactory): Registry {
  return new Registry({
    instancesDir: dir,
    maxInstances: 4,
    factories: { browser: make },
    publicUrl: () => 'http://127.0.0.1',
    chromiumPath: '',
    maxUploadBytes: 1024,
    log: quiet,
    sandboxHost: { refusal: undefined } as unknown as SandboxHost,
  });
}

describe('a cold start that fails', () => {
  it('is retried once with a fresh instance; the failed one is torn down and not listed', async () => {
    const f = factory(['Chromium exited (code 137)']);
    const reg = registry(f.make);
    const rec = await reg.start(planStart({ instance_type: 'browser' }));
    expect(rec.status).toBe('running');
    expect(f.started).toEqual([rec.id]);
    expect(f.stopped).toHaveLength(1);
    expect(f.stopped[0]).not.toBe(rec.id);
    expect(reg.list().map((r) => r.id)).toEqual([rec.id]);
    await reg.close();
  });

  it('fails when the retry fails too, and names its reason', async () => {
    const f = factory(['Chromium exited (code 137)', 'Chromium exited (SIGKILL)']);
    const reg = registry(f.make);
    await expect(reg.start(planStart({ instance_type: 'browser' }))).rejects.toMatchObject({
      status: 500,
      message: expect.stringContaining('Chromium exited (SIGKILL)'),
    });
    expect(f.started).toEqual([]);
    expect(f.stopped).toHaveLength(2);
    await reg.close();
  });

  it('answers the second failure with its reason; that instance stays listed as error', async () => {
    const f = factory([
      'could not open port 3128 inside the instance: listener helper exited',
      'Xvfb did not start within 10 s',
    ]);
    const reg = registry(f.make);
    await expect(reg.start(planStart({ instance_type: 'browser' }))).rejects.toMatchObject({
      status: 500,
      message: expect.stringContaining('Xvfb did not start'),
    });
    expect(f.stopped).toHaveLength(2);
    expect(reg.list().map((r) => r.status)).toEqual(['error']);
    await reg.close();
  });
});
