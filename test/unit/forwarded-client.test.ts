/**
 * The signed client address of a forwarded request (src/server/cluster/forwarded-client.ts): what
 * a node signs another node of the same cluster believes, for that method, path and time only;
 * anything else (another secret, an edited field, an old or malformed header) is ignored.
 */
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { ClientSigner, MAX_AGE_MS } from '../../src/server/cluster/forwarded-client.js';

const secret = randomBytes(32);
const node1 = new ClientSigner(secret);
const node2 = new ClientSigner(Buffer.from(secret));
const now = 1_800_000_000_000;
const path = '/v1/instance/inst_c001aa/bash?x=1';

describe('ClientSigner', () => {
  it('vouches for the address another node of the cluster signed', () => {
    const header = node1.sign('203.0.113.7', 'POST', path, now);
    expect(node2.verify(header, 'POST', path, now)).toBe('203.0.113.7');
    expect(node2.verify(header, 'post', path, now + MAX_AGE_MS)).toBe('203.0.113.7');
    const v6 = node1.sign('2001:db8::1', 'GET', '/cdp/x/y', now);
    expect(node2.verify(v6, 'GET', '/cdp/x/y', now - 1000)).toBe('2001:db8::1');
  });

  it('refuses another cluster’s signature, or none', () => {
    const other = new ClientSigner(randomBytes(32));
    expect(node2.verify(other.sign('203.0.113.7', 'POST', path, now), 'POST', path, now)).toBe(
      undefined,
    );
    expect(node2.verify(undefined, 'POST', path, now)).toBe(undefined);
    expect(node2.verify(['a', 'b'], 'POST', path, now)).toBe(undefined);
  });

  it('binds the signature to the address, method, path and time', () => {
    const header = node1.sign('203.0.113.7', 'POST', path, now);
    const [address, time, mac] = header.split(' ') as [string, string, string];
    expect(node2.verify(header, 'GET', path, now)).toBe(undefined);
    expect(node2.verify(header, 'POST', `${path}&y=2`, now)).toBe(undefined);
    expect(node2.verify(`203.0.113.8 ${time} ${mac}`, 'POST', path, now)).toBe(undefined);
    expect(node2.verify(`${address} ${Number(time) + 1} ${mac}`, 'POST', path, now)).toBe(
      undefined,
    );
    const flipped = (mac[0] === '0' ? '1' : '0') + mac.slice(1);
    expect(node2.verify(`${address} ${time} ${flipped}`, 'POST', path, now)).toBe(undefined);
  });

  it('refuses a stale or future signature', () => {
    const header = node1.sign('203.0.113.7', 'GET', path, now);
    expect(node2.verify(header, 'GET', path, now + MAX_AGE_MS + 1)).toBe(undefined);
    expect(node2.verify(header, 'GET', path, now - MAX_AGE_MS - 1)).toBe(undefined);
  });

  it('refuses malformed headers without throwing', () => {
    const mac = 'a'.repeat(64);
    for (const bad of [
      '',
      'x',
      `not-an-ip ${now} ${mac}`,
      `203.0.113.7 ${now}`,
      `203.0.113.7 -5 ${mac}`,
      `203.0.113.7 ${now} ${mac.slice(1)}`,
      `203.0.113.7 ${now} ${'z'.repeat(64)}`,
      `203.0.113.7  ${now} ${mac}`,
      `203.0.113.7 ${now} ${mac} extra`,
    ]) {
      expect(node2.verify(bad, 'GET', path, now), bad).toBe(undefined);
    }
  });

  it('derives its key from the secret: the same secret signs the same, another differently', () => {
    expect(node1.sign('198.51.100.1', 'GET', '/', now)).toBe(
      node2.sign('198.51.100.1', 'GET', '/', now),
    );
    expect(new ClientSigner(randomBytes(32)).sign('198.51.100.1', 'GET', '/', now)).not.toBe(
      node1.sign('198.51.100.1', 'GET', '/', now),
    );
  });
});
