/**
 * Secrets given to the CLI: an API key, the cluster's database URL. A command line is readable by
 * every local user (`/proc/N/cmdline`, `ps`) for the process's whole life, a process's
 * environment and a 0600 file only by its owner. So each secret has a file flag and an
 * environment variable beside its plain flag: a database URL with a password is refused on the
 * command line outright (`burrow serve` lives long), an API key there is warned about and hidden
 * from the process title once the command has read it.
 */
import { readFileSync, statSync } from 'node:fs';

/**
 * The secret in the file at `path`: its content without trailing line breaks, on one line. Errors
 * say which source failed and why, never what the file holds; a file other users may read is
 * said so on stderr (a Kubernetes secret volume is 0644 unless told otherwise, inside a container
 * no other user shares: refusing it would break the common deployment for little gain).
 */
export function readSecretFile(source: string, path: string, what = 'key'): string {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    throw new Error(`${source}: cannot read ${path} (${e.code ?? e.message})`);
  }
  const secret = text.replace(/[\r\n]+$/, '');
  if (secret === '') throw new Error(`${source}: ${path} is empty`);
  if (/[\r\n]/.test(secret))
    throw new Error(`${source}: ${path} must hold the ${what} on one line`);
  if (statSync(path).mode & 0o077) {
    console.error(`burrow: warning: ${path} can be read by other users (chmod 600 it)`);
  }
  return secret;
}

/**
 * Whether a PostgreSQL connection string carries a password: in its user part
 * (`postgres://u:pw@h/db`), as a `password` parameter (`?password=pw`), or as a `password=`
 * keyword of the key/value form.
 */
export function hasPassword(url: string): boolean {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return /(^|\s)password\s*=/i.test(url);
  }
  if (parsed.password !== '') return true;
  return [...parsed.searchParams.keys()].some((k) => k.toLowerCase() === 'password');
}

/** The flags whose value is a secret that a command hides from its process title. */
const SECRET_FLAGS = ['--api-key'] as const;

/** `argv` with the value of each secret flag (as `--flag V` or `--flag=V`) replaced by `***`. */
export function redactSecretArgs(argv: readonly string[]): string[] {
  return argv.map((arg, i) => {
    for (const flag of SECRET_FLAGS) {
      if (arg.startsWith(`${flag}=`)) return `${flag}=***`;
      if (argv[i - 1] === flag) return '***';
    }
    return arg;
  });
}

/** The secret flags `argv` gives a value on the command line (before a `--`). */
export function secretFlagsIn(argv: readonly string[]): string[] {
  const end = argv.indexOf('--');
  const args = end === -1 ? argv : argv.slice(0, end);
  return SECRET_FLAGS.filter((f) => args.some((a) => a === f || a.startsWith(`${f}=`)));
}

/**
 * Says on stderr that `--api-key` put the key where every local user can read it, and takes it
 * out of this process's title (`/proc/N/cmdline`). What was read before that stays a window: the
 * warning names the file flag and the variable that leave none.
 */
export function hideSecretArgs(argv: readonly string[]): void {
  if (secretFlagsIn(argv).length === 0) return;
  console.error(
    'burrow: warning: --api-key puts the key on the command line, where every local user can ' +
      'read it until burrow hides it; use --api-key-file or BURROW_API_KEY_FILE instead ' +
      '(or BURROW_API_KEY)',
  );
  const [exe = 'node', ...rest] = process.argv;
  process.title = [exe, ...process.execArgv, ...redactSecretArgs(rest)].join(' ');
}

/**
 * A client command's API key: `--api-key`, else `--api-key-file`, else BURROW_API_KEY, else
 * BURROW_API_KEY_FILE; undefined when none is given (the client then says so).
 */
export function clientApiKey(values: {
  'api-key'?: string | undefined;
  'api-key-file'?: string | undefined;
}): string | undefined {
  if (values['api-key'] !== undefined && values['api-key-file'] !== undefined) {
    throw new Error('give --api-key or --api-key-file, not both');
  }
  if (values['api-key'] !== undefined) return values['api-key'];
  if (values['api-key-file'] !== undefined) {
    return readSecretFile('--api-key-file', values['api-key-file']);
  }
  if (process.env.BURROW_API_KEY) return process.env.BURROW_API_KEY;
  const file = process.env.BURROW_API_KEY_FILE || undefined;
  return file === undefined ? undefined : readSecretFile('BURROW_API_KEY_FILE', file);
}
