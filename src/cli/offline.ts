/**
 * `burrow list` and `burrow auth list` without a server: what the embedded default keeps in its
 * data dir (`--data-dir`, else BURROW_DATA_DIR, else $XDG_DATA_HOME/burrow). Each embedded server
 * (and each `burrow serve` on that dir) keeps `instances/run-<pid>-…/instances.jsonl`, a journal
 * of the instances it started and ended (src/server/index.ts); saved auth states are read with
 * the server's own AuthStore. Used when no server is named (no `--base-url`, no
 * BURROW_BASE_URL) and none answers at the default address, or with `--data-dir`.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Instance } from '../client/index.js';
import { pidAlive } from '../internal/process.js';

type Entry =
  | { id: string; type: Instance['instance_type']; launch_time: string; resolution: number[] }
  | { id: string; ended: string };

/** The instances the data dir's journals record, newest run first. */
export function instancesInDataDir(dataDir: string): (Instance & { server_pid: number })[] {
  const root = join(dataDir, 'instances');
  let runs: string[];
  try {
    runs = readdirSync(root).filter((name) => /^run-\d+-/.test(name));
  } catch {
    return [];
  }
  const out: (Instance & { server_pid: number })[] = [];
  for (const run of runs) {
    const pid = Number(/^run-(\d+)-/.exec(run)![1]);
    let text = '';
    try {
      text = readFileSync(join(root, run, 'instances.jsonl'), 'utf8');
    } catch {
      continue;
    }
    const started = new Map<string, Extract<Entry, { type: unknown }>>();
    const ended = new Set<string>();
    for (const line of text.split('\n')) {
      if (!line) continue;
      try {
        const e = JSON.parse(line) as Entry;
        if ('ended' in e) ended.add(e.id);
        else started.set(e.id, e);
      } catch {
        /* a line cut short by a kill */
      }
    }
    const serverLives = pidAlive(pid);
    for (const e of started.values()) {
      out.push({
        id: e.id,
        instance_type: e.type,
        launch_time: e.launch_time,
        status: serverLives && !ended.has(e.id) ? 'running' : 'terminated',
        resolution: e.resolution,
        server_pid: pid,
      } as Instance & { server_pid: number });
    }
  }
  return out.sort((a, b) => b.launch_time.localeCompare(a.launch_time));
}

/** The saved auth states of the data dir, through the server's store (read only). */
export async function authStatesInDataDir(
  dataDir: string,
): Promise<{ id: string; name: string | null }[]> {
  const { AuthStore } = await import('../server/auth-states/store.js');
  // read only: a server may own the dir; nothing is generated, swept or re-encrypted
  return new AuthStore(dataDir, { readOnly: true, warn: () => {}, env: process.env }).list();
}

/** The data dir the embedded default uses. */
export async function embeddedDataDir(given: string | undefined): Promise<string> {
  if (given !== undefined) return given;
  const { defaultDataDir } = await import('../server/index.js');
  return defaultDataDir();
}
