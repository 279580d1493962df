/** What the API commands share: the client from flags or env, errors that say what to do, output. */
import type { ParseArgsConfig } from 'node:util';
import { Burrow, ConfigurationError, ConnectionError, type Instance } from '../client/index.js';
import { DEFAULT_BASE_URL } from '../client/core.js';
import { clientApiKey } from './secrets.js';

/** Flags every API command takes. */
export const apiFlags = {
  'base-url': { type: 'string' },
  'api-key': { type: 'string' },
  'api-key-file': { type: 'string' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const satisfies ParseArgsConfig['options'];

export const apiFlagsUsage = `  --base-url URL   server (default: BURROW_BASE_URL, else ${DEFAULT_BASE_URL})
  --api-key KEY    API key (default: BURROW_API_KEY); every local user can read a command
                   line: prefer --api-key-file or the variable
  --api-key-file PATH  a file holding the key (default: BURROW_API_KEY_FILE)
  --json           print JSON instead of a table`;

/** The key flags of a client command's parsed values. */
export interface KeyFlags {
  'api-key'?: string | undefined;
  'api-key-file'?: string | undefined;
}

/** A client for `--base-url` / `--api-key`, each falling back to its environment variable. */
export function client(values: { 'base-url'?: string } & KeyFlags): Burrow {
  try {
    return new Burrow({ baseUrl: values['base-url'], apiKey: clientApiKey(values) });
  } catch (err) {
    if (err instanceof ConfigurationError && err.code === 'missing_api_key') {
      throw new Error('no API key: pass --api-key-file or set BURROW_API_KEY', { cause: err });
    }
    throw err;
  }
}

/** Runs `fn` with a client; a refused connection says which server was tried. */
export async function withClient<T>(
  values: { 'base-url'?: string } & KeyFlags,
  fn: (client: Burrow) => Promise<T>,
): Promise<T> {
  await using api = client(values);
  try {
    return await fn(api);
  } catch (err) {
    if (err instanceof ConnectionError && err.connectFailed) {
      throw new Error(
        `cannot reach ${api.baseUrl} (is a server running? start one with \`burrow serve\`, or pass --base-url)`,
        { cause: err },
      );
    }
    throw err;
  }
}

export const printJson = (value: unknown) => console.log(JSON.stringify(value, null, 2));

/** Left-aligned columns with a header row. */
export function table(rows: readonly Record<string, string>[], columns: readonly string[]): string {
  if (rows.length === 0) return '(none)';
  const width = (c: string) => Math.max(c.length, ...rows.map((r) => (r[c] ?? '').length));
  const line = (cells: (c: string) => string) =>
    columns
      .map((c) => cells(c).padEnd(width(c)))
      .join('  ')
      .trimEnd();
  return [line((c) => c.toUpperCase()), ...rows.map((r) => line((c) => r[c] ?? ''))].join('\n');
}

const instanceRow = (i: Instance): Record<string, string> => ({
  id: i.id,
  type: i.instance_type,
  status: i.status,
  launched: i.launch_time,
  resolution: i.resolution ? i.resolution.join('x') : '',
});
const INSTANCE_COLUMNS = ['id', 'type', 'status', 'launched', 'resolution'] as const;

/** Prints instances as JSON or as a table. */
export function printInstances(instances: Instance[], json: boolean | undefined): void {
  if (json) printJson(instances);
  else console.log(table(instances.map(instanceRow), INSTANCE_COLUMNS));
}

/** An error for bad command-line input (exit code 2). */
export class UsageError extends Error {
  override name = 'UsageError';
}

/**
 * For commands that also work without a server (`list`, `auth list`): runs `online` against the
 * server named by `--base-url`/BURROW_BASE_URL (or the default address when a key is set), else,
 * or when nothing answers at the default address, `offline` on the embedded default's data dir
 * (`--data-dir` forces that). A note on stderr says which data dir was read.
 */
export async function withServerOrDataDir<T>(
  values: { 'base-url'?: string; 'data-dir'?: string } & KeyFlags,
  online: (client: Burrow) => Promise<T>,
  offline: (dataDir: string) => Promise<T>,
): Promise<T> {
  const { embeddedDataDir } = await import('./offline.js');
  const named = values['base-url'] !== undefined || !!process.env.BURROW_BASE_URL;
  const keyed =
    values['api-key'] !== undefined ||
    values['api-key-file'] !== undefined ||
    !!(process.env.BURROW_API_KEY || process.env.BURROW_API_KEY_FILE);
  const fromDir = async (why: string) => {
    const dir = await embeddedDataDir(values['data-dir']);
    console.error(`burrow: ${why}: reading the data dir ${dir}`);
    return offline(dir);
  };
  if (values['data-dir'] !== undefined) return fromDir('--data-dir given');
  if (!named && !keyed) return fromDir('no server given (--base-url, BURROW_BASE_URL)');
  try {
    return await withClient(values, online);
  } catch (err) {
    const refused = err instanceof Error && err.cause instanceof ConnectionError;
    if (named || !refused) throw err;
    return fromDir(`no server at ${DEFAULT_BASE_URL}`);
  }
}
