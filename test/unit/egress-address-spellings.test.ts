/**
 * The address model's edges (egress/address.ts), as an instance or an operator would meet them:
 * IPv6 destinations that carry no IPv4 address keep their own class, half a bracket or a
 * full-width digit is no address, and an `--allow-network` entry is read exactly as written
 * (a bracketed IPv6 network, a /64, a bare IPv6 address as its own /128, nothing smuggled
 * around it).
 */
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
    ['[2001:db8::1]', 'remote'],
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
