/**
 * The address model's edges (egress/address.ts), as an instance or an operator would meet them:
 * IPv6 destinations that carry no IPv4 address keep their own class, half a bracket or a
 * full-width digit is no address, and an `--allow-network` entry is read exactly as written
 * (a bracketed IPv6 network, a /64, a bare IPv6 address as its own /128, nothing smuggled
 * around it).
 */
import { networkInterfaces } from 'node:os';
import { describe, expect, it } from 'vitest';
import {
  classifyAddress,
  hostAddresses,
  kernelAddress,
  networkMatcher,
  parseCidr,
} from '../../src/server/sandbox/egress/address.js';

const none = new Set<string>();

describe('IPv6 destinations that carry no IPv4 address', () => {
  it.each([
    ['2606:4700:4700::1111', 'remote'],
    ['[2606:4700::1111]', 'remote'],
    ['fe80::1', 'link-local'],
    ['fe80::1%eth0', 'link-local'],
    ['fd12:3456::1', 'private'],
    ['fc00::2', 'private'],
    ['fec0::5', 'private'],
    ['::2', 'unspecified'], // compatible ::0.0.0.2, inside 0.0.0.0/8
  ])('%s is %s', (spelling, kind) => {
    expect(classifyAddress(spelling, none)).toBe(kind);
  });

  it('keeps its own words in kernelAddress', () => {
    expect(kernelAddress('2606:4700:4700::1111')).toBe('2606:4700:4700:0:0:0:0:1111');
    expect(kernelAddress('[fd12::1]')).toBe('fd12:0:0:0:0:0:0:1');
  });
});

describe("networks no one routes on the internet, and the host's own networks", () => {
  it.each([
    '192.0.2.9', // documentation
    '198.51.100.7',
    '203.0.113.250',
    '198.18.0.2', // benchmarking
    '198.19.255.1',
    '192.0.0.170', // IETF protocol assignments
    '240.0.0.1', // reserved
    '255.255.255.255',
    '239.1.2.3', // multicast
    '2001:db8::1',
    '3fff::1',
    '2001:2::9',
    '100::1',
    'ff02::1',
    '64:ff9b:1::a00:1', // local-use NAT64
    '64:ff9b::a00:2', // NAT64 carrying 10.0.0.2
    '64:ff9b::c000:209', // NAT64 carrying 192.0.2.9
  ])('%s is private', (address) => {
    expect(classifyAddress(address, none)).toBe('private');
  });

  it('a NAT64 address carrying a public IPv4 address is remote, and its neighbours are not', () => {
    expect(classifyAddress('64:ff9b::808:808', none)).toBe('remote');
    expect(classifyAddress('198.17.255.255', none)).toBe('remote');
    expect(classifyAddress('198.20.0.0', none)).toBe('remote');
    expect(classifyAddress('223.255.255.255', none)).toBe('remote');
  });

  it("an address on one of the host's networks is private, whatever it looks like", () => {
    const onLan = Object.assign(new Set<string>(['85.1.2.3']), {
      onHostNetwork: (canonical: string) => canonical.startsWith('85.1.2.'),
    });
    expect(classifyAddress('85.1.2.3', onLan)).toBe('host');
    expect(classifyAddress('85.1.2.1', onLan)).toBe('private');
    expect(classifyAddress('85.1.3.1', onLan)).toBe('remote');
    // this machine's own: every non-loopback interface's network
    const here = hostAddresses();
    for (const list of Object.values(networkInterfaces())) {
      for (const info of list ?? []) {
        const net = parseCidr(info.cidr ?? '');
        if (
          info.internal ||
          !net ||
          net.prefix === 0 ||
          net.prefix === (net.family === 4 ? 32 : 128)
        )
          continue;
        // the network's first address: on it, never this host's own unless it is
        const first = info.family === 'IPv4' ? info.address.replace(/\.\d+$/, '.0') : undefined;
        if (first && first !== info.address && net.prefix <= 24) {
          expect(['private', 'link-local']).toContain(classifyAddress(first, here));
        }
      }
    }
  });
});

describe('spellings that are no address', () => {
  it.each(['[::1', '::1]', 'x::1]', '[127.0.0.1', '10.0.0.1]'])('%s', (spelling) => {
    expect(kernelAddress(spelling)).toBeUndefined();
    expect(classifyAddress(spelling, none)).toBe('unspecified');
  });

  // getaddrinfo reads no full-width digits: such a host is a name, resolved (and judged) as one
  it.each(['１０.０.０.１', '１０.０.０.1', '1０.０.０.１', '１２７.0.0.1'])('%s', (spelling) => {
    expect(kernelAddress(spelling)).toBeUndefined();
  });
});

describe('surrounding white space', () => {
  it('is no part of the address', () => {
    expect(kernelAddress(' 10.0.0.1\t')).toBe('10.0.0.1');
    expect(classifyAddress(' 10.0.0.1 ', none)).toBe('private');
    expect(networkMatcher(['10.0.0.0/8'])(' 10.1.2.3 ')).toBe(true);
    expect(parseCidr(' 10.0.0.0/8 ')).toEqual({ address: '10.0.0.0', prefix: 8, family: 4 });
  });
});

describe('--allow-network entries', () => {
  it('reads IPv6 networks with their own prefix range', () => {
    expect(parseCidr('fd00::/64')).toEqual({
      address: 'fd00:0:0:0:0:0:0:0',
      prefix: 64,
      family: 6,
    });
    expect(parseCidr('[fd00::]/8')).toEqual({
      address: 'fd00:0:0:0:0:0:0:0',
      prefix: 8,
      family: 6,
    });
    expect(parseCidr('fd00::/129')).toBeUndefined();
    const allow = networkMatcher(['fd00:1:2:3::/64']);
    expect(allow('fd00:1:2:3:ffff::1')).toBe(true);
    expect(allow('fd00:1:2:4::1')).toBe(false);
  });

  it('reads a bare IPv6 address as that one address', () => {
    expect(parseCidr('fd00::1')?.prefix).toBe(128);
    const allow = networkMatcher(['fd00::1']);
    expect(allow('fd00::1')).toBe(true);
    expect(allow('fd00::2')).toBe(false);
  });

  it.each(['1.2.3.4/10.0.0.0/8', 'x/10.0.0.0/8', '[fd00::]1/64', '1[::]', '[fd00::]x'])(
    'refuses %s whole rather than allowing the network inside it',
    (entry) => {
      expect(parseCidr(entry)).toBeUndefined();
      const allow = networkMatcher([entry]);
      expect(allow('10.1.2.3')).toBe(false);
      expect(allow('fd00::1')).toBe(false);
      expect(allow('1::')).toBe(false);
    },
  );
});

describe("the host's own addresses", () => {
  it('are loopback or host, whatever else they would be', () => {
    const own = hostAddresses();
    expect(own.has('127.0.0.1')).toBe(true);
    for (const a of own) expect(['loopback', 'host']).toContain(classifyAddress(a, own));
  });
});
