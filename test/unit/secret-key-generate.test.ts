/**
 * The data dir's generated key (src/server/auth-states/secret-key.ts) when `secret-key` is a link
 * to a file that is not there (a secret volume not mounted): the server does not generate a key
 * in its place nor through the link, it says it cannot read the key file, and the link is left
 * as it was. A key written once is never replaced by a later generation. Generating and rotating
 * keys leaves no file open; a key file line with something before the key (`key: <base64>`) is
 * refused, not read as the key.
 */
import { randomBytes } from 'node:crypto';
import {
  lstatSync,
  mkdtempSync,
  readdirSync,
  readlinkSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { loadKeyring, rotateDataDirKey } from '../../src/server/auth-states/secret-key.js';

const dirs: string[] = [];
const tempDir = () => {
  const d = mkdtempSync(join(tmpdir(), 'burrow-keygen-'));
  dirs.push(d);
  return d;
};
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

describe('the generated key', () => {
  it('is not made over a link to a missing file: the server says it cannot read the key', () => {
    const dir = tempDir();
    const target = join(dir, 'mnt', 'secret');
    symlinkSync(target, join(dir, 'secret-key'));
    expect(() => loadKeyring(dir, { env: {} })).toThrow(
      `the data dir key: cannot read ${join(dir, 'secret-key')} (ENOENT)`,
    );
    expect(lstatSync(join(dir, 'secret-key')).isSymbolicLink()).toBe(true);
    expect(readlinkSync(join(dir, 'secret-key'))).toBe(target);
    // nothing else is left behind (no temp file of the attempt)
    expect(readdirSync(dir)).toEqual(['secret-key']);
  });

  it('is made once: a later open reads the same key', () => {
    const dir = tempDir();
    const first = loadKeyring(dir, { env: {} });
    expect(loadKeyring(dir, { env: {} }).current.id).toBe(first.current.id);
    expect(readdirSync(dir)).toEqual(['secret-key']);
  });
});

describe('key files', () => {
  it('generating and rotating keys leaves no file open', () => {
    const open = () => readdirSync('/proc/self/fd').length;
    const dirs = Array.from({ length: 20 }, tempDir);
    const before = open();
    for (const dir of dirs) {
      loadKeyring(dir, { env: {} });
      rotateDataDirKey(dir);
      rotateDataDirKey(dir);
    }
    expect(open() - before).toBeLessThan(10);
  });

  it('a line with something before the key is refused, not read as the key', () => {
    const dir = tempDir();
    const key = randomBytes(32).toString('base64');
    for (const line of [`key: ${key}`, `:${key}`, `"${key}`]) {
      const path = join(dir, 'k');
      writeFileSync(path, `${line}\n`, { mode: 0o600 });
      expect(() => loadKeyring(dir, { env: {}, secretKeyFile: path }), line).toThrow(
        'a secret key is 32 bytes written as 64 hex digits or base64',
      );
    }
  });
});
