/**
 * `burrow auth`: the saved browser auth states: list, export to / import from Playwright's
 * `storageState` JSON, delete; and `rotate-key`, which rotates the key a server's data dir
 * generated to encrypt them (src/server/auth-states/secret-key.ts).
 */
import { readFile } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import type { Burrow } from '../client/index.js';
import { writeFileAtomic } from '../internal/fs.js';
import {
  apiFlags,
  apiFlagsUsage,
  printJson,
  table,
  UsageError,
  withClient,
  withServerOrDataDir,
} from './common.js';

export const usage = `burrow auth list [options]
burrow auth export ID_OR_NAME [--out FILE] [options]
burrow auth import FILE|- [--name NAME] [options]
burrow auth delete ID_OR_NAME [options]
burrow auth rotate-key [--data-dir DIR]

Saved browser auth states (cookies, localStorage, sessionStorage and IndexedDB). Sessions apply
one with openSession({ authState: 'id or name' }).

  list         the saved states (id and name)
  export       print a state as Playwright's storageState JSON (or write it to --out FILE,
               mode 0600): browser.newContext({ storageState: FILE }) loads it
  import       save a Playwright storageState (e.g. from context.storageState({ path,
               indexedDB: true })) read from FILE or stdin; with --name, the one state of that
               name is replaced (several of that name are refused)
  delete       delete a state (without a server only while none runs on the data dir)
  rotate-key   give the data dir a new generated secret key (the server keeps reading states
               sealed with the old one and re-encrypts them at its next start, then drops the
               old key). Servers given --secret-key-file or BURROW_SECRET_KEY rotate by starting
               with the new key and the old one in --old-secret-key-file or BURROW_OLD_SECRET_KEY.
  --data-dir   the server's data dir (default BURROW_DATA_DIR, else $XDG_DATA_HOME/burrow)

list, export and delete work without a server too: when none is given (--base-url,
BURROW_BASE_URL) and none answers at the default address, or with --data-dir, they read the
data dir (its secret key, or BURROW_SECRET_KEY / BURROW_SECRET_KEY_FILE, opens the states).

${apiFlagsUsage}`;

/** The state with this id, else the one state with this name. */
async function resolve(api: Burrow, idOrName: string): Promise<string> {
  const { resolveAuthState } = await import('./offline.js');
  return resolveAuthState(await api.authStates.list(), idOrName);
}

async function readInput(file: string): Promise<unknown> {
  let text: string;
  if (file === '-') {
    const chunks: Buffer[] = [];
    for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
    text = Buffer.concat(chunks).toString('utf8');
  } else {
    text = await readFile(file, 'utf8');
  }
  try {
    return JSON.parse(text);
  } catch {
    throw new Error(
      `${file === '-' ? 'stdin' : file} is not JSON (a Playwright storageState file)`,
    );
  }
}

export async function run(argv: string[]): Promise<void> {
  const { values, positionals } = parseArgs({
    args: argv,
    options: {
      ...apiFlags,
      out: { type: 'string' },
      name: { type: 'string' },
      'data-dir': { type: 'string' },
    },
    allowPositionals: true,
  });
  if (values.help) return console.log(usage);
  const [command, arg, ...rest] = positionals;
  const bad = () => new UsageError(`usage:\n${usage.split('\n\n')[0]}`);
  const needs = (n: number) => {
    if ((n === 0 ? arg === undefined : arg !== undefined) && rest.length === 0) return;
    throw bad();
  };

  switch (command) {
    case 'list': {
      needs(0);
      // without a server: the embedded default's data dir (common.ts, offline.ts)
      const states = await withServerOrDataDir(
        values,
        (api) => api.authStates.list(),
        async (dir) => (await import('./offline.js')).authStatesInDataDir(dir),
      );
      if (values.json) return printJson(states);
      console.log(
        table(
          states.map((s) => ({ id: s.id, name: s.name ?? '' })),
          ['id', 'name'],
        ),
      );
      return;
    }
    case 'export': {
      needs(1);
      // without a server: the data dir's store, as `list` (common.ts, offline.ts)
      const state = await withServerOrDataDir(
        values,
        async (api) => api.authStates.storageState(await resolve(api, arg!)),
        async (dir) => (await import('./offline.js')).authStateFromDataDir(dir, arg!),
      );
      const text = `${JSON.stringify(state, null, 2)}\n`;
      if (values.out === undefined) return void process.stdout.write(text);
      await writeFileAtomic(values.out, text, 0o600);
      console.error(`wrote ${values.out}`);
      return;
    }
    case 'import':
      needs(1);
      return withClient(values, async (api) => {
        const body = await readInput(arg!);
        const saved = await api.authStates.import(body as never, {
          ...(values.name !== undefined && { name: values.name }),
        });
        if (values.json) return printJson(saved);
        console.log(`${saved.auth_state_id} ${saved.name}`);
      });
    case 'delete': {
      needs(1);
      const id = await withServerOrDataDir(
        values,
        async (api) => {
          const found = await resolve(api, arg!);
          await api.authStates.delete(found);
          return found;
        },
        async (dir) => (await import('./offline.js')).deleteAuthStateInDataDir(dir, arg!),
      );
      if (values.json) return printJson({ status: 'success', auth_state_id: id });
      console.log(`deleted ${id}`);
      return;
    }
    case 'rotate-key': {
      needs(0);
      const { rotateDataDirKey } = await import('../server/auth-states/secret-key.js');
      const { defaultDataDir } = await import('../server/index.js');
      const dir = values['data-dir'] ?? defaultDataDir();
      const { oldId, newId } = rotateDataDirKey(dir);
      if (values.json) return printJson({ old_key_id: oldId, new_key_id: newId, data_dir: dir });
      console.log(
        `new secret key ${newId} in ${dir} (was ${oldId}); restart the server to re-encrypt the saved states`,
      );
      return;
    }
    default:
      throw bad();
  }
}
