/**
 * The address model's near misses (egress/address.ts): IPv6 addresses that share a piece of a
 * special one (its last word, NAT64's first two words, the zeros of a mapped address) but are not
 * it keep their own class, a client is told apart by its /64, and the networks the host is on are
 * read from its real interfaces.
 */
import { networkInterfaces } from 'node:os';
import { describe, expect, it } from 'vitest';
import {
  canonicalIp,
  classifyAddress,
  clientKey,
  hostAddresses,
} from '../../src/server/sandbox/egress/address.js';

const none = new Set<string>();

describe('IPv6 addresses that look like a special one in part', () => {
  it('ending in ::1 is loopback only when every word before it is zero', () => {
    expect(classifyAddress('::1', none)).toBe('loopback');
    expect(classifyAddress('2a00:1450::1', none)).toBe('remote');
    expect(classifyAddress('1:0:0:0:0:0:0:1', none)).toBe('remote');
    expect(classifyAddress('fe80::1', none)).toBe('link-local');
  });

  it("is NAT64's IPv4 address only under 64:ff9b::/96, whole", () => {
    expect(classifyAddress('64:ff9b::7f00:1', none)).toBe('loopback');
    expect(canonicalIp('64:ff9b::7f00:1')).toBe('127.0.0.1');
    // one word off, each in turn: an ordinary IPv6 address
    for (const near of ['65:ff9b::7f00:1', '64:ff9c::7f00:1', '64:ff9b:0:0:0:1:7f00:1']) {
      expect(classifyAddress(near, none), near).toBe('remote');
      expect(canonicalIp(near), near).not.toBe('127.0.0.1');
    }
    expect(classifyAddress('64:ff9b::a00:1', none)).toBe('private'); // 10.0.0.1
  });

  it('is a mapped or compatible IPv4 address only behind five zero words', () => {
    expect(canonicalIp('::ffff:7f00:1')).toBe('127.0.0.1');
    expect(canonicalIp('::7f00:1')).toBe('127.0.0.1');
    expect(classifyAddress('1::ffff:7f00:1', none)).toBe('remote');
    expect(classifyAddress('0:0:0:0:1:ffff:7f00:1', none)).toBe('remote');
  });
});

describe('clients told apart for the caps per client', () => {
  it('an IPv6 client by its /64; only ::1 among them is this host', () => {
    expect(clientKey('::1')).toBe('this host');
    expect(clientKey('2a00:1450:4001:81a::1')).toBe('2a00:1450:4001:81a::/64');
    expect(clientKey('2a00:1450:4001:81a::2')).toBe('2a00:1450:4001:81a::/64');
    expect(clientKey('2a00:1450:4001:81b::1')).toBe('2a00:1450:4001:81b::/64');
    expect(clientKey('1:0:0:0:0:0:0:1')).toBe('1:0:0:0::/64');
  });
});

describe("the host's own networks", () => {
  // the interfaces of this machine, read the way hostAddresses reads them
  const external = Object.values(networkInterfaces())
    .flat()
    .filter((i) => i !== undefined && !i.internal && i.family === 'IPv4' && i.cidr !== null);

  it('are its interfaces but loopback: another address of their network is private', () => {
    // the interfaces alone: the kernel's routes hold their networks too (egress-host-routes.test.ts)
    const host = hostAddresses([]);
    expect(external.length, 'this machine has a network interface').toBeGreaterThan(0);
    const toInt = (a: string) => a.split('.').reduce((v, p) => v * 256 + Number(p), 0);
    const toDots = (n: number) => [24, 16, 8, 0].map((b) => (n >>> b) & 255).join('.');
    for (const i of external) {
      expect(host.has(i!.address)).toBe(true);
      expect(classifyAddress(i!.address, host)).toBe('host');
      const prefix = Number(i!.cidr!.split('/')[1]);
      const address = toInt(i!.address);
      const network = prefix === 0 ? 0 : (address & (~0 << (32 - prefix))) >>> 0;
      // a neighbour on the same network (none on a /32: the address itself), and the address
      // just past the network
      const neighbour =
        prefix === 32 ? address : network + 1 === address ? network + 2 : network + 1;
      const past = network + 2 ** (32 - prefix);
      expect(host.onHostNetwork?.(toDots(neighbour), 'ipv4'), toDots(neighbour)).toBe(true);
      expect(host.onHostNetwork?.(toDots(past), 'ipv4'), toDots(past)).toBe(
        external.some((j) => j !== i && toInt(j!.address) >>> 0 === past),
      );
    }
    // loopback's network is not one of them: 127.0.0.0/8 stays loopback, not a network
    expect(host.onHostNetwork?.('127.0.0.2', 'ipv4')).toBe(false);
    // and an address of no interface's network is remote
    expect(host.onHostNetwork?.('8.8.8.8', 'ipv4')).toBe(false);
  });
});
