/**
 * The sidecar class (src/server/sandbox/sidecar.ts) on real processes, started with a plain
 * spawn (the toolbox and kernel tests run it inside instances): its program goes in on stdin, a
 * chunk its protocol refuses kills it, its exit is reported once with a bounded stderr tail, a
 * missed deadline kills it, `close` lets it end on its own before the group is killed, and
 * `Sidecar` starts one on first use, replaces a dead one and starts none once stopped.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { Supervised } from '../../src/internal/process.js';
import type { SandboxSpawn } from '../../src/server/sandbox/sandbox.js';
import {
  Sidecar,
  SidecarProcess,
  type SidecarFailure,
  type SidecarProtocol,
  type SidecarSpec,
} from '../../src/server/sandbox/sidecar.js';

const plainSpawn: SandboxSpawn = (argv, o) =>
  new Supervised(argv[0]!, argv.slice(1), { env: o.env, stdio: o.stdio, cwd: o.cwd });

/** A Python program read from stdin's first line: echoes each later line upper-cased. */
const ECHO = [
  'import sys',
  'for line in sys.stdin:',
  '    if line.strip() == "die":',
  '        sys.stderr.write("x" * 5000 + "last words\\n"); sys.exit(3)',
  '    if line.strip() == "hang":',
  '        import time; time.sleep(60)',
  '    if line.strip() == "bye":',
  '        print("BYE", flush=True); sys.exit(0)',
  '    print(line.strip().upper(), flush=True)',
].join('\n');
const BOOT = 'import sys,json;exec(json.loads(sys.stdin.readline()))';

class Errored extends Error {
  constructor(
    readonly kind: SidecarFailure,
    message: string,
  ) {
    super(message);
  }
}

function start(
  onLine: (line: string) => string | undefined = () => undefined,
  spec: Partial<SidecarSpec> = {},
) {
  const lines: string[] = [];
  const failures: Error[] = [];
  const protocol: SidecarProtocol = {
    read: (chunk) => {
      for (const line of chunk.toString().split('\n').filter(Boolean)) {
        lines.push(line);
        const why = onLine(line);
        if (why) return why;
      }
      return undefined;
    },
    failed: (err) => failures.push(err),
  };
  const sidecar = new SidecarProcess(
    {
      name: 'the echo',
      spawn: plainSpawn,
      argv: ['/usr/bin/python3', '-I', '-u', '-c', BOOT],
      env: { PATH: '/usr/bin:/bin' },
      cwd: '/',
      boot: [`${JSON.stringify(ECHO)}\n`],
      stderrChars: 100,
      error: (kind, message) => new Errored(kind, message),
      ...spec,
    },
    protocol,
  );
  const nextLine = async (n: number) => {
    for (let i = 0; i < 200 && lines.length < n; i++) await sleep(25);
    return lines[n - 1];
  };
  return { sidecar, lines, failures, nextLine };
}

describe('SidecarProcess', () => {
  it('boots its program from stdin and talks over its pipes', async () => {
    const { sidecar, nextLine } = start();
    sidecar.write('hello\n');
    expect(await nextLine(1)).toBe('HELLO');
    expect(sidecar.running).toBe(true);
    await sidecar.close({ graceMs: 2000, killGraceMs: 200 });
    expect(sidecar.running).toBe(false);
  });

  it('is killed, and no longer read, when its output breaks the protocol', async () => {
    const { sidecar, failures, nextLine, lines } = start((line) =>
      line === 'EVIL' ? 'a line nobody asked for' : undefined,
    );
    sidecar.write('evil\n');
    expect(await nextLine(1)).toBe('EVIL');
    const exit = await sidecar.proc.exited;
    expect(exit.signal).not.toBeNull(); // killed, not exited on its own
    expect(failures).toHaveLength(1);
    expect(failures[0]).toMatchObject({ kind: 'broken' });
    expect(failures[0]!.message).toBe('the echo broke its protocol: a line nobody asked for');
    // writes after the failure go nowhere, and nothing more is read
    sidecar.write('more\n');
    await sleep(100);
    expect(lines).toEqual(['EVIL']);
  });

  it('reports its exit once, with the last characters of its stderr', async () => {
    const { sidecar, failures } = start();
    sidecar.write('die\n');
    await sidecar.proc.exited;
    await sleep(20);
    expect(failures).toHaveLength(1);
    expect(failures[0]).toMatchObject({ kind: 'exited' });
    const msg = failures[0]!.message;
    expect(msg).toMatch(/^the echo exited \(status 3\): x+last words$/);
    // the tail is bounded by stderrChars (100), whatever the process wrote
    expect(msg.length).toBeLessThan('the echo exited (status 3): '.length + 100);
    expect(sidecar.failure).toBe(failures[0]);
    expect(sidecar.running).toBe(false);
  });

  it('fails and is killed when it misses a deadline', async () => {
    const { sidecar, failures } = start();
    sidecar.write('hang\n');
    const never = new Promise<string>(() => {});
    const t0 = performance.now();
    await expect(sidecar.within(never, 300, 'the echo took too long', 100)).rejects.toMatchObject({
      kind: 'timeout',
      message: 'the echo took too long',
    });
    expect(performance.now() - t0).toBeGreaterThanOrEqual(290);
    const exit = await sidecar.proc.exited;
    expect(exit.signal).not.toBeNull();
    expect(failures).toHaveLength(1);
    // the outcome of a promise that settles in time is passed through
    const ok = start();
    await expect(ok.sidecar.within(Promise.resolve(7), 1000, 'late')).resolves.toBe(7);
    await ok.sidecar.close({ graceMs: 1000, killGraceMs: 100 });
  });

  it('closes gracefully: the farewell is written and it exits on its own', async () => {
    const { sidecar, nextLine } = start();
    await sidecar.close({ graceMs: 5000, killGraceMs: 100, farewell: 'bye\n' });
    expect(await nextLine(1)).toBe('BYE');
    expect(await sidecar.proc.exited).toEqual({ code: 0, signal: null });
  });

  it('is killed when it does not end within the grace', async () => {
    const { sidecar } = start();
    sidecar.write('hang\n');
    const t0 = performance.now();
    await sidecar.close({ graceMs: 200, killGraceMs: 100 });
    expect((await sidecar.proc.exited).signal).not.toBeNull();
    expect(performance.now() - t0).toBeLessThan(5000);
  });

  it('throws what the spawn throws', () => {
    expect(() =>
      start(undefined, {
        spawn: () => {
          throw new Error('sandbox is stopping');
        },
      }),
    ).toThrow('sandbox is stopping');
  });
});

describe('Sidecar', () => {
  const make = () => {
    const starts: number[] = [];
    let replaced = 0;
    const holder = new Sidecar({
      start: async (generation) => {
        starts.push(generation);
        return { sidecar: start().sidecar, generation };
      },
      stopped: () => new Error('stopped'),
      onReplace: () => replaced++,
    });
    return { holder, starts, replaced: () => replaced };
  };

  it('starts one on first use, shared by callers that ask meanwhile', async () => {
    const { holder, starts } = make();
    expect(holder.running).toBeUndefined();
    const [a, b] = await Promise.all([holder.get(), holder.get()]);
    expect(a).toBe(b);
    expect(starts).toEqual([1]);
    expect(holder.running).toBe(a);
    expect(await holder.settled()).toBe(a);
    await holder.stop((t) => t.sidecar.close({ graceMs: 1000, killGraceMs: 100 }));
  });

  it('replaces a process that died, numbering it, and tells the owner', async () => {
    const { holder, starts, replaced } = make();
    const first = await holder.get();
    first.sidecar.write('die\n');
    await first.sidecar.proc.exited;
    await sleep(20);
    expect(holder.running).toBeUndefined();
    const second = await holder.get();
    expect(second).not.toBe(first);
    expect(second.generation).toBe(2);
    expect(starts).toEqual([1, 2]);
    expect(replaced()).toBe(1);
    await holder.stop((t) => t.sidecar.close({ graceMs: 1000, killGraceMs: 100 }));
  });

  it('kills a process that failed without exiting before starting the next', async () => {
    const { holder } = make();
    const first = await holder.get();
    first.sidecar.fail('broken', 'made up');
    expect(first.sidecar.proc.running).toBe(true);
    const second = await holder.get();
    expect(second).not.toBe(first);
    expect(first.sidecar.proc.running).toBe(false);
    await holder.stop((t) => t.sidecar.close({ graceMs: 1000, killGraceMs: 100 }));
  });

  it('once stopped, ends the current process and starts no other', async () => {
    const { holder, starts } = make();
    const first = await holder.get();
    let ended = 0;
    const end = async (t: typeof first) => {
      ended++;
      await t.sidecar.close({ graceMs: 1000, killGraceMs: 100 });
    };
    await Promise.all([holder.stop(end), holder.stop(end)]);
    expect(ended).toBe(1);
    expect(first.sidecar.proc.running).toBe(false);
    expect(holder.stopping).toBe(true);
    await expect(holder.get()).rejects.toThrow('stopped');
    expect(starts).toEqual([1]);
  });

  it('starts again after a start that failed', async () => {
    let n = 0;
    const holder = new Sidecar<{ sidecar: SidecarProcess }>({
      start: async () => {
        if (++n === 1) throw new Error('first start fails');
        return { sidecar: start().sidecar };
      },
      stopped: () => new Error('stopped'),
    });
    await expect(holder.get()).rejects.toThrow('first start fails');
    const t = await holder.get();
    expect(t.sidecar.running).toBe(true);
    await holder.stop((x) => x.sidecar.close({ graceMs: 1000, killGraceMs: 100 }));
  });
});
