/**
 * A saved profile's bytes (profiles/seal.ts, pack.ts) are sealed as a stream off the main thread
 * and stay the format the one-call version wrote: a profile it saved opens, and one saved now
 * opens with it. The unpacker reads any split of the stream into chunks the same way.
 */
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { deflateRawSync, inflateRawSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { packParts, Unpacker } from '../../src/server/profiles/pack.js';
import { seal, unseal } from '../../src/server/profiles/seal.js';

const entries = [
  { path: 'Default' },
  { path: 'Default/Cookies', data: randomBytes(300_000) },
  { path: 'Default/Empty', data: Buffer.alloc(0) },
  { path: 'Default/Zeros', data: Buffer.alloc(5_000_000) },
  { path: 'Local State', data: Buffer.from('{"a":1}') },
];
const key = randomBytes(32);
const aad = Buffer.from('burrow profile p/n');

/** The one-call version's plaintext: every entry's head, path and data in one buffer. */
function packedWhole(): Buffer {
  return Buffer.concat([...packParts(entries)]);
}

const plain = (list: readonly { path: string; data?: Buffer }[]) =>
  list.map((e) => ({ path: e.path, data: e.data?.toString('base64') }));

describe('a sealed profile', () => {
  it('saved by the one-call version (deflateRawSync, one cipher call) opens', async () => {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', key, iv);
    cipher.setAAD(aad);
    const body = Buffer.concat([cipher.update(deflateRawSync(packedWhole())), cipher.final()]);
    const opened = await unseal(body, { key, iv, aad, tag: cipher.getAuthTag() }, 1e8);
    expect(plain(opened)).toEqual(plain(entries));
  });

  it('saved now opens with the one-call version', async () => {
    const iv = randomBytes(12);
    const sealed = await seal(entries, { key, iv, aad }, 1e8, () => new Error('too big'));
    const decipher = createDecipheriv('aes-256-gcm', key, iv);
    decipher.setAAD(aad);
    decipher.setAuthTag(sealed.tag);
    const body = Buffer.concat(sealed.parts);
    expect(body.length).toBe(sealed.bytes);
    const opened = inflateRawSync(Buffer.concat([decipher.update(body), decipher.final()]));
    expect(opened.equals(packedWhole())).toBe(true);
  });

  it('does not open with another associated data, or past its unpacked bound', async () => {
    const iv = randomBytes(12);
    const sealed = await seal(entries, { key, iv, aad }, 1e8, () => new Error('too big'));
    const body = Buffer.concat(sealed.parts);
    const other = Buffer.from('burrow profile q/n');
    await expect(unseal(body, { key, iv, aad: other, tag: sealed.tag }, 1e8)).rejects.toThrow(
      /authenticate/,
    );
    await expect(unseal(body, { key, iv, aad, tag: sealed.tag }, 1_000_000)).rejects.toThrow(
      /more than 1000000 bytes|malformed entry/,
    );
  });

  it('is refused as soon as it passes its sealed bound', async () => {
    const big = [{ path: 'r', data: randomBytes(4_000_000) }];
    await expect(
      seal(big, { key, iv: randomBytes(12), aad }, 1_000_000, () => new Error('too big')),
    ).rejects.toThrow('too big');
  });
});

describe('the unpacker', () => {
  it('reads the stream the same way however it is split', () => {
    const whole = packedWhole();
    for (const size of [1, 7, 9, 4096, whole.length]) {
      const u = new Unpacker(1e8);
      for (let at = 0; at < whole.length; at += size) u.push(whole.subarray(at, at + size));
      expect(plain(u.end())).toEqual(plain(entries));
    }
  });

  it('refuses a truncated stream, a bad kind, a length past its bound and a path leaving it', () => {
    const whole = packedWhole();
    const cut = new Unpacker(1e8);
    cut.push(whole.subarray(0, whole.length - 1));
    expect(() => cut.end()).toThrow('truncated entry');
    const head = (kind: number, pathLen: number, size: number) => {
      const b = Buffer.alloc(9);
      b.writeUInt8(kind, 0);
      b.writeUInt32LE(pathLen, 1);
      b.writeUInt32LE(size, 5);
      return b;
    };
    expect(() => new Unpacker(100).push(head(3, 1, 0))).toThrow('malformed entry');
    expect(() => new Unpacker(100).push(head(1, 1, 2 ** 31))).toThrow('malformed entry');
    expect(() =>
      new Unpacker(100).push(Buffer.concat([head(1, 5, 0), Buffer.from('../x')]).subarray(0, 13)),
    ).not.toThrow();
    expect(() =>
      new Unpacker(100).push(Buffer.concat([head(2, 4, 0), Buffer.from('../x')])),
    ).toThrow('leaves the profile');
  });
});
