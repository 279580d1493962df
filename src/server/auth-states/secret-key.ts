/**
 * The key that encrypts auth states at rest (src/server/auth-states/store.ts), and the older keys the
 * store still reads while it re-encrypts what they sealed.
 *
 * A key is 32 random bytes written as 64 hex digits or as base64 (`openssl rand -base64 32`).
 * The current key comes from the first of: `secretKeyFile` (`burrow serve --secret-key-file`),
 * `BURROW_SECRET_KEY`, `BURROW_SECRET_KEY_FILE`, else `<dataDir>/secret-key`, generated on first
 * use with mode 0600. Older keys, accepted for reading only: `oldSecretKeyFiles`
 * (`--old-secret-key-file`), `BURROW_OLD_SECRET_KEY`, `BURROW_OLD_SECRET_KEY_FILE`, and
 * `<dataDir>/secret-key.old`, which `rotateDataDirKey` (`burrow auth rotate-key`) writes. A key
 * file may hold several keys, one per line. Errors name the source and never the key.
 */
import { createHash, randomBytes } from 'node:crypto';
import {
  closeSync,
  fsyncSync,
  linkSync,
  mkdirSync,
  openSync,
  readFileSync,
  renameSync,
  statSync,
  unlinkSync,
  writeSync,
} from 'node:fs';
import { dirname, join } from 'node:path';

export interface SecretKey {
  /** 16 hex digits derived from the key (not secret): which key sealed a file. */
  readonly id: string;
  readonly bytes: Buffer;
  /** Where it came from, for messages: a flag, a variable or a path. */
  readonly source: string;
}

export interface Keyring {
  /** Seals every write. */
  readonly current: SecretKey;
  /** Read-only keys, for states sealed before a rotation. */
  readonly old: readonly SecretKey[];
  /** `<dataDir>/secret-key.old` when it exists: the store removes it once nothing needs it. */
  readonly dataDirOldFile?: string;
}

export interface KeyringOptions {
  /** File holding the current key (`--secret-key-file`). */
  secretKeyFile?: string | undefined;
  /** Files holding older keys, read only (`--old-secret-key-file`). */
  oldSecretKeyFiles?: readonly string[] | undefined;
  /**
   * The keyring's variables (`BURROW_SECRET_KEY`, …): the server passes those its config read
   * (src/server/config.ts), a command line tool its own environment. Default none.
   */
  env?: Readonly<Record<string, string | undefined>> | undefined;
  /** Generate `<dataDir>/secret-key` when no key is configured. Default true. */
  generate?: boolean | undefined;
}

export const KEY_FILE = 'secret-key';
export const OLD_KEY_FILE = 'secret-key.old';

/** The id of key bytes: a hash, so the key cannot be learnt from it. */
export function keyId(bytes: Buffer): string {
  return createHash('sha256')
    .update('burrow auth-state key\0')
    .update(bytes)
    .digest('hex')
    .slice(0, 16);
}

/** One key from its text (hex or base64 of 32 bytes); the error names `source`, never the text. */
export function parseKey(text: string, source: string): SecretKey {
  const t = text.trim();
  let bytes: Buffer | undefined;
  if (/^[0-9a-fA-F]{64}$/.test(t)) bytes = Buffer.from(t, 'hex');
  else if (/^[A-Za-z0-9+/_-]{43}={0,1}$/.test(t)) bytes = Buffer.from(t, 'base64');
  if (bytes?.length !== 32) {
    throw new Error(
      `${source}: a secret key is 32 bytes written as 64 hex digits or base64 (openssl rand -base64 32)`,
    );
  }
  return { id: keyId(bytes), bytes, source };
}

/** Every key in a file, one per line (blank lines and `#` comments skipped). */
function keysInFile(path: string, source: string): SecretKey[] {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    throw new Error(`${source}: cannot read ${path} (${e.code ?? e.message})`);
  }
  const keys = text
    .split(/\r?\n/)
    .map((l) => l.trim())
    .filter((l) => l !== '' && !l.startsWith('#'))
    .map((l, i) => parseKey(l, `${source} (${path}, key ${i + 1})`));
  if (keys.length === 0) throw new Error(`${source}: ${path} holds no key`);
  if (statSync(path).mode & 0o077) {
    console.error(`burrow: warning: ${path} can be read by other users (chmod 600 it)`);
  }
  return keys;
}

function oneKeyInFile(path: string, source: string): SecretKey {
  const keys = keysInFile(path, source);
  if (keys.length > 1) throw new Error(`${source}: ${path} must hold one key`);
  return keys[0]!;
}

/** Writes `text` to `path` atomically (temp, fsync, rename, fsync of the directory), mode 0600. */
function writeAtomicSync(path: string, text: string, exclusive = false): void {
  const dir = dirname(path);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const tmp = join(dir, `.${KEY_FILE}.${randomBytes(6).toString('hex')}.tmp`);
  const fd = openSync(tmp, 'wx', 0o600);
  try {
    writeSync(fd, text);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  if (exclusive) {
    // a hard link fails if `path` exists: two processes generating at once keep the first key
    try {
      try {
        linkSync(tmp, path);
      } finally {
        unlinkSync(tmp);
      }
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
  } else {
    renameSync(tmp, path);
  }
  const d = openSync(dir, 'r');
  try {
    fsyncSync(d);
  } finally {
    closeSync(d);
  }
}

const exists = (path: string) => {
  try {
    statSync(path);
    return true;
  } catch {
    return false;
  }
};

/** The current key and the old ones, by the precedence in this module's comment. */
export function loadKeyring(dataDir: string, opts: KeyringOptions = {}): Keyring {
  const env = opts.env ?? {};
  const envKey = env.BURROW_SECRET_KEY || undefined;
  const envFile = env.BURROW_SECRET_KEY_FILE || undefined;
  let current: SecretKey;
  if (opts.secretKeyFile !== undefined) {
    current = oneKeyInFile(opts.secretKeyFile, '--secret-key-file');
  } else if (envKey !== undefined && envFile !== undefined) {
    throw new Error('set BURROW_SECRET_KEY or BURROW_SECRET_KEY_FILE, not both');
  } else if (envKey !== undefined) {
    current = parseKey(envKey, 'BURROW_SECRET_KEY');
  } else if (envFile !== undefined) {
    current = oneKeyInFile(envFile, 'BURROW_SECRET_KEY_FILE');
  } else {
    const path = join(dataDir, KEY_FILE);
    if (!exists(path)) {
      if (opts.generate === false) throw new Error(`no secret key: ${path} does not exist`);
      writeAtomicSync(path, `${randomBytes(32).toString('base64')}\n`, true);
    }
    current = oneKeyInFile(path, 'the data dir key');
  }

  const old: SecretKey[] = [];
  for (const file of opts.oldSecretKeyFiles ?? []) {
    old.push(...keysInFile(file, '--old-secret-key-file'));
  }
  if (env.BURROW_OLD_SECRET_KEY) {
    env.BURROW_OLD_SECRET_KEY.split(/[\s,]+/)
      .filter(Boolean)
      .forEach((k, i) => old.push(parseKey(k, `BURROW_OLD_SECRET_KEY (key ${i + 1})`)));
  }
  if (env.BURROW_OLD_SECRET_KEY_FILE) {
    old.push(...keysInFile(env.BURROW_OLD_SECRET_KEY_FILE, 'BURROW_OLD_SECRET_KEY_FILE'));
  }
  const dataDirOld = join(dataDir, OLD_KEY_FILE);
  const hasDataDirOld = exists(dataDirOld);
  if (hasDataDirOld) old.push(...keysInFile(dataDirOld, 'the data dir old key'));
  return {
    current,
    old: old.filter((k, i) => k.id !== current.id && old.findIndex((o) => o.id === k.id) === i),
    ...(hasDataDirOld && { dataDirOldFile: dataDirOld }),
  };
}

/**
 * Rotates the data dir's generated key: the current key is added to `secret-key.old`, then a new
 * one replaces `secret-key`. The server re-encrypts every state under the new key on its next
 * start and then deletes `secret-key.old`. A crash between the two steps leaves the old key in
 * both files, which is harmless. Returns the ids of the old and the new key.
 */
export function rotateDataDirKey(dataDir: string): { oldId: string; newId: string } {
  const path = join(dataDir, KEY_FILE);
  if (!exists(path)) {
    throw new Error(`${path} does not exist: this data dir has no generated key to rotate`);
  }
  const current = oneKeyInFile(path, 'the data dir key');
  const oldPath = join(dataDir, OLD_KEY_FILE);
  const previous = exists(oldPath) ? readFileSync(oldPath, 'utf8').trimEnd() : '';
  writeAtomicSync(
    oldPath,
    `${previous ? `${previous}\n` : ''}${current.bytes.toString('base64')}\n`,
  );
  const fresh = randomBytes(32);
  writeAtomicSync(path, `${fresh.toString('base64')}\n`);
  return { oldId: current.id, newId: keyId(fresh) };
}
