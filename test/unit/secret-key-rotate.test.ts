/**
 * Rotating the data dir's generated key (auth-states/secret-key.ts) as an operator meets it: a
 * damaged key file is refused with the file named for what it is, and rotating twice keeps every
 * earlier key readable.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  KEY_FILE,
  keyId,
  loadKeyring,
  rotateDataDirKey,
} from '../../src/server/auth-states/secret-key.js';

const dirs: string[] = [];
const tempDir = () => {
  const d = mkdtempSync(join(tmpdir(), 'burrow-keyrot-'));
  dirs.push(d);
  return d;
};
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

describe('rotateDataDirKey', () => {
  it('refuses a key file holding two keys, naming it the data dir key', () => {
    const dir = tempDir();
    const two = [randomBytes(32), randomBytes(32)].map((k) => k.toString('base64')).join('\n');
    writeFileSync(join(dir, KEY_FILE), `${two}\n`, { mode: 0o600 });
    expect(() => rotateDataDirKey(dir)).toThrow(/^the data dir key: .* must hold one key$/);
  });

  it('twice: both earlier keys stay old keys', () => {
    const dir = tempDir();
    const first = randomBytes(32);
    writeFileSync(join(dir, KEY_FILE), `${first.toString('base64')}\n`, { mode: 0o600 });
    const one = rotateDataDirKey(dir);
    const two = rotateDataDirKey(dir);
    expect(one.oldId).toBe(keyId(first));
    expect(two.oldId).toBe(one.newId);
    const ring = loadKeyring(dir);
    expect(ring.current.id).toBe(two.newId);
    expect(ring.old.map((k) => k.id).sort()).toEqual([one.oldId, two.oldId].sort());
  });
});
