/**
 * What an instance's artifacts cost the host once copied out (artifacts/store.ts): sparse files are not
 * kept, zeros are copied as holes, and all instances together stay under `maxRetainedBytes`.
 * Real files in a temporary home; every refusal is logged with its reason.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdirSync, mkdtempSync, openSync, closeSync, rmSync, statSync, writeSync } from 'node:fs';
import { truncateSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ArtifactStore, retainRefusal } from '../../src/server/artifacts/store.js';
import type { Logger } from '../../src/server/instances/runtime.js';

const MiB = 1024 * 1024;
const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function setup(maxRetainedBytes: number) {
  const base = mkdtempSync(join(tmpdir(), 'burrow-retain-'));
  dirs.push(base);
  const warnings: { reason?: string }[] = [];
  const log: Logger = {
    info() {},
    debug() {},
    error() {},
    warn: (obj: unknown) => warnings.push(obj as { reason?: string }),
  } as Logger;
  const store = new ArtifactStore({
    root: join(base, 'retained'),
    retentionMs: 60_000,
    log,
    maxRetainedBytes,
  });
  return { base, store, warnings };
}

/** A home with `Downloads/<guid>` files written by `make`, registered as completed downloads. */
async function instance(
  base: string,
  store: ArtifactStore,
  name: string,
  files: ((path: string) => void)[],
) {
  const home = join(base, name);
  mkdirSync(join(home, 'Downloads'), { recursive: true });
  const artifacts = store.forInstance(name);
  await artifacts.attach({ host: home, inside: '/home/user', budget: 4096 * MiB });
  const ids: string[] = [];
  for (const make of files) {
    const guid = randomUUID();
    make(join(home, 'Downloads', guid));
    artifacts.downloadBegan(guid, `${guid}.bin`);
    artifacts.downloadProgress(guid, 0, 'completed');
    ids.push(guid);
  }
  return { artifacts, ids, retained: join(base, 'retained', name) };
}

const dense = (bytes: number) => (path: string) => {
  const fd = openSync(path, 'w');
  writeSync(fd, randomBytes(bytes));
  closeSync(fd);
};
const sparse = (bytes: number) => (path: string) => {
  dense(4096)(path);
  truncateSync(path, bytes);
};
/** Data, then `zeros` zero bytes really written (not a hole inside), then data. */
const zeroFilled = (zeros: number) => (path: string) => {
  const fd = openSync(path, 'w');
  writeSync(fd, randomBytes(MiB));
  writeSync(fd, Buffer.alloc(zeros));
  writeSync(fd, randomBytes(MiB));
  closeSync(fd);
};

describe('retainRefusal', () => {
  it('refuses past the budget and sparse files, and allows a last partial block', () => {
    expect(retainRefusal(10, 4096, 100)).toBeUndefined();
    expect(retainRefusal(3 * MiB, 3 * MiB, 2 * MiB)).toMatch(/budget/);
    expect(retainRefusal(4_000_000_000, 4096, 8_000_000_000)).toMatch(/^sparse/);
    expect(retainRefusal(MiB, 0, 2 * MiB)).toBeUndefined(); // tiny files may take no block
  });
});

describe('artifacts kept after stop', () => {
  it('keeps a real file, not a sparse one, and copies zeros as holes', async () => {
    const { base, store, warnings } = setup(1024 * MiB);
    const { artifacts, ids, retained } = await instance(base, store, 'a', [
      dense(2 * MiB),
      sparse(1024 * MiB),
      zeroFilled(16 * MiB),
    ]);
    await artifacts.finish();
    const kept = (await artifacts.listDownloads()).map((d) => [d.id, d.size]);
    expect(kept).toEqual([
      [ids[0], 2 * MiB],
      [ids[2], 18 * MiB],
    ]);
    expect(warnings.map((w) => w.reason)).toEqual([expect.stringMatching(/^sparse/)]);
    const copy = statSync(join(retained, ids[2]!));
    expect(copy.size).toBe(18 * MiB);
    expect(copy.blocks * 512).toBeLessThan(3 * MiB); // the 16 MiB of zeros are a hole
    expect(store.retainedBytes).toBe(20 * MiB);
    await artifacts.expire();
    expect(store.retainedBytes).toBe(0);
  });

  it('every instance together stays under maxRetainedBytes', async () => {
    const { base, store, warnings } = setup(5 * MiB);
    const one = await instance(base, store, 'one', [dense(3 * MiB)]);
    const two = await instance(base, store, 'two', [dense(3 * MiB), dense(MiB)]);
    await one.artifacts.finish();
    await two.artifacts.finish();
    expect((await one.artifacts.listDownloads()).length).toBe(1);
    expect((await two.artifacts.listDownloads()).map((d) => d.id)).toEqual([two.ids[1]]);
    expect(warnings.map((w) => w.reason)).toEqual([expect.stringMatching(/maxRetainedBytes/)]);
    expect(store.retainedBytes).toBe(4 * MiB);
    // once one instance's copies go, their bytes are free again
    await one.artifacts.expire();
    const three = await instance(base, store, 'three', [dense(3 * MiB)]);
    await three.artifacts.finish();
    expect((await three.artifacts.listDownloads()).length).toBe(1);
  });
});
