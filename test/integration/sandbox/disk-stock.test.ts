/**
 * Instance disks made ahead (sandbox/quota.ts `DiskStock`): a start takes a formatted, mounted
 * disk from the stock instead of making one, the disk it gets is as fresh and as private as one
 * made at its start, the stock refills, and nothing of it outlives the server.
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Sandbox, SandboxHost } from '../../../src/server/sandbox/index.js';
import { eventually } from '../../helpers/server.js';

const quiet = { info() {}, warn() {}, error() {}, debug() {} };
const MiB = 1024 ** 2;

/** Mount points under `dir`, from the server's mount table. */
function mountsUnder(dir: string): string[] {
  return readFileSync('/proc/self/mounts', 'utf8')
    .split('\n')
    .map((line) => line.split(' ')[1] ?? '')
    .filter((m) => m.startsWith(`${dir}/`));
}

/** The options `dir` is mounted with, from the server's mount table. */
function mountOptions(dir: string): string[] {
  const line = readFileSync('/proc/self/mounts', 'utf8')
    .split('\n')
    .find((l) => l.split(' ')[1] === dir);
  return line?.split(' ')[3]?.split(',') ?? [];
}

describe('instance disks made ahead', () => {
  let data: string;
  let host: SandboxHost;

  beforeAll(async () => {
    data = mkdtempSync(join(tmpdir(), 'burrow-stock-'));
    const runDir = join(data, `run-${process.pid}-${randomBytes(4).toString('hex')}`);
    mkdirSync(runDir);
    host = await SandboxHost.create({
      runDir,
      log: quiet,
      limits: { diskBytes: 64 * MiB },
      diskStock: 2,
    });
  });

  afterAll(async () => {
    await host?.close();
    rmSync(data, { recursive: true, force: true });
  });

  it('hands a start a fresh mounted disk of the stock, refills it, and removes all on close', async () => {
    const stock = host.diskStock!;
    expect(stock).toBeDefined();
    await stock.filled();
    expect(stock.ready).toBe(2);
    // made ahead, mounted where no instance reaches
    const stockDir = join(host.root, '.stock');
    expect(statSync(stockDir).mode & 0o777).toBe(0o700);
    expect(mountsUnder(stockDir)).toHaveLength(2);

    const name = `stock-${randomBytes(4).toString('hex')}`;
    const dir = mkdtempSync(join(data, 'inst-'));
    const sandbox = await Sandbox.create(host, { dir, name, log: quiet });
    try {
      expect(stock.ready).toBe(1); // it took one
      const instanceDisk = join(host.root, name, 'disk');
      expect(mountsUnder(host.root)).toContain(instanceDisk);
      expect(sandbox.limits.disk_bytes).toBe(64 * MiB);
      // as fresh as a disk made now: only the instance's three directories and ext4's own
      expect(readdirSync(instanceDisk).sort()).toEqual(['home', 'lost+found', 'shm', 'tmp']);
      expect(statSync(instanceDisk).mode & 0o777).toBe(0o711);
      expect(statSync(sandbox.hostHome).uid).toBe(sandbox.uid);
      // thrown away with the instance: no journal, no write barriers (an fdatasync inside ends
      // in the host's page cache, not in an fsync of the image on the host's disk)
      expect(mountOptions(instanceDisk)).toEqual(
        expect.arrayContaining(['nosuid', 'nodev', 'nobarrier']),
      );
      const features = execFileSync('dumpe2fs', ['-h', join(host.root, name, 'disk.img')], {
        stdio: ['ignore', 'pipe', 'ignore'],
      }).toString();
      expect(features).toMatch(/^Filesystem features:/m);
      expect(features).not.toMatch(/^Filesystem features:.*has_journal/m);
      // the quota holds on it
      const r = await sandbox.exec(
        ['sh', '-c', 'dd if=/dev/zero of=$HOME/big bs=1M count=100 2>&1; echo rc=$?'],
        { env: { PATH: '/usr/bin:/bin', HOME: sandbox.home }, timeoutMs: 60_000 },
      );
      expect(r.stdout.toString()).toMatch(/No space left on device/);
      // refilled in the background after the claim
      await eventually(() => stock.ready === 2, 'the stock refilled', 30_000);
    } finally {
      await sandbox.stop();
    }
    expect(mountsUnder(host.root)).not.toContain(join(host.root, name, 'disk'));
    await host.close();
    expect(mountsUnder(host.root)).toEqual([]);
    expect(() => execFileSync('ls', [stockDir], { stdio: 'ignore' })).toThrow();
  }, 120_000);
});
