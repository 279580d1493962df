/**
 * The leak ledger (docs/architecture.md): one small file per instance a process
 * started, under `<data dir>/sessions/`, naming the owner's pid and the server's base URL (never
 * the API key). The owner removes its entry once the instance is stopped; `reap` stops the
 * instances whose owner is gone.
 */
import { createHash } from 'node:crypto';
import { readdir, readFile, rm } from 'node:fs/promises';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { writeFileAtomic } from '../internal/fs.js';
import { pidAlive } from '../internal/process.js';
import { dataDir } from './data-dir.js';

export const LedgerEntry = z.object({
  instanceId: z.string().min(1),
  /** Base URL of the API that started it, normalised by `normaliseBaseUrl`. */
  baseUrl: z.string(),
  /** Started on a server embedded in the owner process; that server died with it. */
  embedded: z.boolean(),
  pid: z.int().positive(),
  /** Start time of `pid` from /proc (clock ticks since boot), to tell a reused pid apart. */
  pidStart: z.string().nullable(),
  /** ISO 8601. */
  startedAt: z.string(),
});
export type LedgerEntry = z.output<typeof LedgerEntry>;

/** `http://h:1/x/` and `http://h:1/x` are the same server. */
const normaliseBaseUrl = (url: string) => new URL(url).href.replace(/\/+$/, '');

/** Start time of a live process, or null when unknown (not Linux, or no such process). */
function processStart(pid: number): { start: string; zombie: boolean } | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' '); // fields 3… of proc(5)
    return { start: fields[19] ?? '', zombie: fields[0] === 'Z' || fields[0] === 'X' };
  } catch {
    return null;
  }
}

/** Whether the process that wrote `entry` still runs (the same process, not a reused pid). */
export function ownerAlive(entry: Pick<LedgerEntry, 'pid' | 'pidStart'>): boolean {
  if (!pidAlive(entry.pid)) return false;
  const now = processStart(entry.pid);
  if (now === null) return true; // no /proc: trust kill(0)
  return !now.zombie && (entry.pidStart === null || entry.pidStart === now.start);
}

export class Ledger {
  /** Default `<data dir>/sessions`. */
  constructor(readonly dir: string = join(dataDir(), 'sessions')) {}

  #file(baseUrl: string, instanceId: string): string {
    const server = createHash('sha256').update(baseUrl).digest('hex').slice(0, 12);
    return join(this.dir, `${server}-${encodeURIComponent(instanceId)}.json`);
  }

  /** Records an instance this process just started. */
  async record(instanceId: string, baseUrl: string, embedded: boolean): Promise<void> {
    const entry: LedgerEntry = {
      instanceId,
      baseUrl: normaliseBaseUrl(baseUrl),
      embedded,
      pid: process.pid,
      pidStart: processStart(process.pid)?.start ?? null,
      startedAt: new Date().toISOString(),
    };
    await writeFileAtomic(this.#file(entry.baseUrl, instanceId), JSON.stringify(entry) + '\n');
  }

  async remove(instanceId: string, baseUrl: string): Promise<void> {
    await rm(this.#file(normaliseBaseUrl(baseUrl), instanceId), { force: true });
  }

  /** Every readable entry with its file; files that do not parse are left alone. */
  async files(): Promise<{ file: string; entry: LedgerEntry }[]> {
    const names = await readdir(this.dir).catch(() => [] as string[]);
    const out = [];
    for (const name of names.filter((n) => n.endsWith('.json'))) {
      const file = join(this.dir, name);
      try {
        out.push({ file, entry: LedgerEntry.parse(JSON.parse(await readFile(file, 'utf8'))) });
      } catch {
        /* being written, or not ours */
      }
    }
    return out;
  }

  async entries(): Promise<LedgerEntry[]> {
    return (await this.files()).map((f) => f.entry);
  }
}

export interface ReapTarget {
  /** The server these credentials are for; only its entries are stopped. */
  baseUrl: string;
  /** Stops one instance; resolves when it is stopped or already gone. */
  stop(instanceId: string): Promise<void>;
}

export interface ReapReport {
  /** Orphans stopped on `target`. */
  stopped: LedgerEntry[];
  /** Orphans of an embedded server: that server died with its process, so only the entry went. */
  removed: LedgerEntry[];
  /** Orphans on another server, whose API key we do not have. Left in the ledger. */
  skipped: LedgerEntry[];
  /** Orphans whose stop failed. Left in the ledger for the next reap. */
  failed: { entry: LedgerEntry; error: unknown }[];
}

/**
 * Stops the instances whose owning process is gone: those on `target` through it; entries of a
 * dead process's embedded server are only removed; others are skipped. Cheap when nothing is
 * orphaned (one readdir, a few small reads).
 */
export async function reap(ledger: Ledger, target?: ReapTarget): Promise<ReapReport> {
  const report: ReapReport = { stopped: [], removed: [], skipped: [], failed: [] };
  const base = target && normaliseBaseUrl(target.baseUrl);
  for (const { file, entry } of await ledger.files()) {
    if (ownerAlive(entry)) continue;
    if (entry.embedded) {
      await rm(file, { force: true });
      report.removed.push(entry);
    } else if (target && entry.baseUrl === base) {
      try {
        await target.stop(entry.instanceId);
        await rm(file, { force: true });
        report.stopped.push(entry);
      } catch (error) {
        report.failed.push({ entry, error });
      }
    } else {
      report.skipped.push(entry);
    }
  }
  return report;
}
