/**
 * Self-routing instance ids (src/server/cluster/ids.ts): the owner's slot read back from a
 * genuine id; a forged, edited or foreign id refused without any lookup.
 */
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { IdSigner } from '../../src/server/cluster/ids.js';

const signer = new IdSigner(randomBytes(32));

describe('cluster instance ids', () => {
  it('carry the owner slot, and each is new', () => {
    for (const slot of [1, 2, 0xabc, 0xfff]) {
      const id = signer.mint(slot);
      expect(id).toMatch(/^inst_c[0-9a-f]{35}$/);
      expect(signer.owner(id)).toEqual({ slot });
    }
    expect(signer.mint(7)).not.toBe(signer.mint(7));
  });

  it('refuses an id whose slot, random part or tag was edited', () => {
    const id = signer.mint(2);
    const flip = (i: number) => id.slice(0, i) + (id[i] === '0' ? '1' : '0') + id.slice(i + 1);
    expect(signer.owner(flip(8))).toBeUndefined(); // slot 2 → 3 (or 1 → 0)
    expect(signer.owner(flip(15))).toBeUndefined(); // random part
    expect(signer.owner(flip(id.length - 1))).toBeUndefined(); // tag
    expect(signer.owner(id.toUpperCase())).toBeUndefined();
  });

  it('refuses the ids of another cluster (another secret)', () => {
    const other = new IdSigner(randomBytes(32));
    expect(signer.owner(other.mint(1))).toBeUndefined();
  });

  it('takes a single-node id as the answering node’s own; refuses anything else', () => {
    expect(signer.owner('inst_0123456789abcdef')).toBe('local');
    for (const bad of [
      '',
      'inst_',
      'inst_c',
      'inst_0123',
      `inst_c000${'0'.repeat(32)}`,
      'auth_0123456789abcdef',
      'inst_c001../../etc/passwd',
    ]) {
      expect(signer.owner(bad)).toBeUndefined();
    }
  });

  it('refuses a short secret and a slot outside 1…4095', () => {
    expect(() => new IdSigner(randomBytes(16))).toThrow(/at least 32 bytes/);
    for (const slot of [0, -1, 4096, 1.5])
      expect(() => signer.mint(slot)).toThrow(/not a node slot/);
  });
});
