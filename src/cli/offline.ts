/**
 * `burrow list` and `burrow auth list | export | delete` without a server: what the embedded
 * default keeps in its data dir (`--data-dir`, else BURROW_DATA_DIR, else $XDG_DATA_HOME/burrow).
 * Each embedded server (and each `burrow serve` on that dir) keeps
 * `instances/run-<pid>-…/instances.jsonl`, a journal of the instances it started and ended
 * (src/server/index.ts); saved auth states are read with the server's own AuthStore. Used when no
 * server is named (no `--base-url`, no BURROW_BASE_URL) and none answers at the default address,
 * or with `--data-dir`.
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

/**
 * The data dir's auth-state store, read only: a server may own the dir, so nothing is generated,
 * swept or re-encrypted. The key comes from where the server takes it: the variables of this
 * process (BURROW_SECRET_KEY, …), else the data dir's generated key; without one, sealed states
 * list with a null name and cannot be exported.
 */
async function readOnlyStore(dataDir: string) {
  const { AuthStore } = await import('../server/auth-states/store.js');
  return new AuthStore(dataDir, { readOnly: true, warn: () => {}, env: process.env });
}

/** The saved auth states of the data dir, through the server's store (read only). */
export async function authStatesInDataDir(
  dataDir: string,
): Promise<{ id: string; name: string | null }[]> {
  return (await readOnlyStore(dataDir)).list();
}

/**
 * The id of the state whose id is `idOrName`, else of the one state named so; the errors say
 * what matched. The same rule against a server (cli/auth.ts) and on a data dir.
 */
export function resolveAuthState(
  states: readonly { id: string; name?: string | null | undefined }[],
  idOrName: string,
  unknownHint = '',
): string {
  if (states.some((s) => s.id === idOrName)) return idOrName;
  const named = states.filter((s) => s.name === idOrName);
  if (named.length === 1) return named[0]!.id;
  if (named.length > 1) {
    throw new Error(
      `the name "${idOrName}" matches ${named.length} states (${named.map((s) => s.id).join(', ')}); pass an id`,
    );
  }
  throw new Error(`no saved auth state has the id or name "${idOrName}"${unknownHint}`);
}

/** `resolveAuthState` on the data dir's states, saying when sealed ones may hide the name. */
function resolveInDataDir(
  states: readonly { id: string; name: string | null }[],
  idOrName: string,
): string {
  const sealed = states.filter((s) => s.name === null).length;
  const hint = sealed
    ? ` (${sealed} state(s) cannot be opened without their secret key, so their names are unknown: set BURROW_SECRET_KEY or BURROW_SECRET_KEY_FILE, or pass an id)`
    : '';
  return resolveAuthState(states, idOrName, hint);
}

/** The data dir's state `idOrName` as Playwright's `storageState`, as the server exports it. */
export async function authStateFromDataDir(dataDir: string, idOrName: string): Promise<unknown> {
  const store = await readOnlyStore(dataDir);
  const id = resolveInDataDir(store.list(), idOrName);
  const { toStorageState } = await import('../server/auth-states/storage-state.js');
  return toStorageState(store.get(id).data); // a state sealed with another key: its 503 message
}

/** Pids of the live processes (`burrow serve`, embedded servers) that run on the data dir. */
function serversOnDataDir(dataDir: string): number[] {
  let runs: string[];
  try {
    runs = readdirSync(join(dataDir, 'instances'));
  } catch {
    return [];
  }
  const pids = runs.map((run) => Number(/^run-(\d+)-/.exec(run)?.[1]));
  return [...new Set(pids.filter((pid) => Number.isInteger(pid) && pid > 0 && pidAlive(pid)))];
}

/**
 * Deletes the data dir's state `idOrName` (readable or not: an id always works); its id. Refused
 * while a server runs on the dir: it holds the states in memory and would keep serving the
 * deleted one, so the delete goes through it instead.
 */
export async function deleteAuthStateInDataDir(dataDir: string, idOrName: string): Promise<string> {
  const live = serversOnDataDir(dataDir);
  if (live.length > 0) {
    throw new Error(
      `a burrow server (pid ${live.join(', ')}) runs on the data dir ${dataDir}: delete through it (--base-url and --api-key), or stop it first`,
    );
  }
  const id = resolveInDataDir((await readOnlyStore(dataDir)).list(), idOrName);
  const { FileAuthStateBackend } = await import('../server/auth-states/backend.js');
  // no server runs on the dir, so no write of one is in flight
  await new FileAuthStateBackend(join(dataDir, 'auth-states')).delete(id);
  return id;
}

/** The data dir the embedded default uses. */
export async function embeddedDataDir(given: string | undefined): Promise<string> {
  if (given !== undefined) return given;
  const { defaultDataDir } = await import('../server/index.js');
  return defaultDataDir();
}
