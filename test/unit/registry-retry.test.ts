/**
 * A start whose instance was SIGKILLed while it came up is retried once with a fresh instance
 * (src/server/registry.ts, KILLED_WHILE_STARTING); any other start failure is answered at once.
 * The runtimes here are stand-ins: a process killed at exactly that moment cannot be produced on
 * demand, which is the fault this injects.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { Registry } from '../../src/server/registry.js';
import type { InstanceRuntime, RuntimeFactory } from '../../src/server/runtime.js';
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
        started.push(ctx.id);
      },
      stop: async () => {
        stopped.push(ctx.id);
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

describe('a start killed while it came up', () => {
  it('is retried once with a fresh instance; the killed one is torn down and not listed', async () => {
    const f = factory(['Chromium exited (code 137)']);
    const reg = registry(f.make);
    const rec = await reg.start({ instance_type: 'browser' });
    expect(rec.status).toBe('running');
    expect(f.started).toEqual([rec.id]);
    expect(f.stopped).toHaveLength(1);
    expect(f.stopped[0]).not.toBe(rec.id);
    expect(reg.list().map((r) => r.id)).toEqual([rec.id]);
    await reg.close();
  });

  it('fails when the retry is killed too, and names the reason', async () => {
    const f = factory(['Chromium exited (code 137)', 'Chromium exited (SIGKILL)']);
    const reg = registry(f.make);
    await expect(reg.start({ instance_type: 'browser' })).rejects.toMatchObject({
      status: 500,
      message: expect.stringContaining('Chromium exited (SIGKILL)'),
    });
    expect(f.started).toEqual([]);
    expect(f.stopped).toHaveLength(2);
    await reg.close();
  });

  it('answers any other failure at once, without a retry', async () => {
    const f = factory(['Xvfb did not start within 10 s']);
    const reg = registry(f.make);
    await expect(reg.start({ instance_type: 'browser' })).rejects.toMatchObject({ status: 500 });
    expect(f.stopped).toHaveLength(1);
    expect(reg.list().map((r) => r.status)).toEqual(['error']);
    await reg.close();
  });
});
