/** What the API commands share: the client from flags or env, errors that say what to do, output. */
import type { ParseArgsConfig } from 'node:util';
import { Burrow, ConfigurationError, ConnectionError, type Instance } from '../client/index.js';

/** Flags every API command takes. */
export const apiFlags = {
  'base-url': { type: 'string' },
  'api-key': { type: 'string' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const satisfies ParseArgsConfig['options'];

export const apiFlagsUsage = `  --base-url URL   server (default: BURROW_BASE_URL, else http://127.0.0.1:8787)
  --api-key KEY    API key (default: BURROW_API_KEY)
  --json           print JSON instead of a table`;

/** A client for `--base-url` / `--api-key`, each falling back to its environment variable. */
export function client(values: { 'base-url'?: string; 'api-key'?: string }): Burrow {
  try {
    return new Burrow({ baseUrl: values['base-url'], apiKey: values['api-key'] });
  } catch (err) {
    if (err instanceof ConfigurationError && err.code === 'missing_api_key') {
      throw new Error('no API key: pass --api-key or set BURROW_API_KEY', { cause: err });
    }
    throw err;
  }
}

/** Runs `fn` with a client; a refused connection says which server was tried. */
export async function withClient<T>(
  values: { 'base-url'?: string; 'api-key'?: string },
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

export const instanceRow = (i: Instance): Record<string, string> => ({
  id: i.id,
  type: i.instance_type,
  status: i.status,
  launched: i.launch_time,
  resolution: i.resolution ? i.resolution.join('x') : '',
});
export const INSTANCE_COLUMNS = ['id', 'type', 'status', 'launched', 'resolution'] as const;

/** Prints instances as JSON or as a table. */
export function printInstances(instances: Instance[], json: boolean | undefined): void {
  if (json) printJson(instances);
  else console.log(table(instances.map(instanceRow), INSTANCE_COLUMNS));
}

/** An error for bad command-line input (exit code 2). */
export class UsageError extends Error {
  override name = 'UsageError';
}
