/**
 * The egress's pure rules at their edges, each value computed inside its test: the spellings a
 * host or an address can take (whitespace, brackets, the length limit, zone ids, leading dots of
 * a blocked domain, IPv6 forms that carry or do not carry an IPv4 address), and what a refusal
 * says (the address and the port, for the client that was refused).
 */
import { describe, expect, it } from 'vitest';
import {
  blockedDomainMatcher,
  canonicalIp,
  checkAddresses,
  classifyAddress,
  normalizeHost,
  type HostAccess,
} from '../../src/server/sandbox/egress/policy.js';

describe('normalizeHost at its edges', () => {
  it('ignores whitespace around the name', () => {
    expect(normalizeHost('  Example.com\t')).toBe('example.com');
    expect(normalizeHost(' [::1] ')).toBe('::1');
  });

  it('takes brackets only as a pair', () => {
    expect(normalizeHost('[example.com')).toBeUndefined();
    expect(normalizeHost('example.com]')).toBeUndefined();
    expect(normalizeHost('[2001:DB8::1]')).toBe('2001:db8::1');
  });

  it('accepts a name of 255 characters and refuses one of 256', () => {
    const label = 'a'.repeat(63);
    const longest = [label, label, label, label].join('.'); // 4 × 63 + 3 dots
    expect(longest).toHaveLength(255);
    expect(normalizeHost(longest)).toBe(longest);
    expect(normalizeHost(`${longest}b`)).toBeUndefined();
    expect(normalizeHost(`b${longest}`)).toBeUndefined();
  });
});

describe('blocked domains written with leading dots', () => {
  it('`.example.com` and `..example.com` block example.com and its subdomains', () => {
    const blocked = blockedDomainMatcher(['.example.com', '..evil.test', '...']);
    expect(blocked('example.com')).toBe('example.com');
    expect(blocked('a.example.com')).toBe('example.com');
    expect(blocked('evil.test')).toBe('evil.test');
    expect(blocked('x.y.evil.test')).toBe('evil.test');
    expect(blocked('example.org')).toBeUndefined();
  });

  it('a matcher of only invalid entries blocks nothing', () => {
    const blocked = blockedDomainMatcher(['not a host', '', 'a..b']);
    for (const host of ['example.com', 'a.b', 'not', 'com']) expect(blocked(host)).toBeUndefined();
  });
});

describe('canonicalIp', () => {
  it('spells IPv6 in lower-case hex, all eight words', () => {
    expect(canonicalIp('2001:DB8::5')).toBe('2001:db8:0:0:0:0:0:5');
    expect(canonicalIp('FE80::ABCD')).toBe('fe80:0:0:0:0:0:0:abcd');
    expect(canonicalIp('::')).toBe('0:0:0:0:0:0:0:0');
    expect(canonicalIp('1:2:3:4:5:6:7::')).toBe('1:2:3:4:5:6:7:0');
  });

  it('reads the mapped and the compatible forms as IPv4, and no other', () => {
    expect(canonicalIp('::ffff:10.0.0.1')).toBe('10.0.0.1');
    expect(canonicalIp('::FFFF:a00:1')).toBe('10.0.0.1');
    expect(canonicalIp('::10.0.0.1')).toBe('10.0.0.1');
    // a word between the zeros and the address: an IPv6 address like any other
    expect(canonicalIp('::1:a00:1')).toBe('0:0:0:0:0:1:a00:1');
    expect(canonicalIp('::fffe:7f00:1')).toBe('0:0:0:0:0:fffe:7f00:1');
    expect(canonicalIp('1::ffff:7f00:1')).toBe('1:0:0:0:0:ffff:7f00:1');
  });

  it('drops a zone id, in the mapped form too', () => {
    expect(canonicalIp('fe80::1%eth0')).toBe('fe80:0:0:0:0:0:0:1');
    expect(canonicalIp('::ffff:10.1.2.3%eth0')).toBe('10.1.2.3');
    expect(canonicalIp('::ffff:10.1.2.3%2')).toBe('10.1.2.3');
  });

  it('is undefined for what is no address', () => {
    for (const bad of ['', 'example.com', '1.2.3', '1.2.3.256', '::g', '1:2:3:4:5:6:7:8:9']) {
      expect(canonicalIp(bad), bad).toBeUndefined();
    }
  });
});

describe('classifyAddress for IPv6 forms', () => {
  it('judges an IPv4 address carried in IPv6 as that address, and nothing else so', () => {
    const host = new Set([canonicalIp('10.1.2.3')!]);
    expect(classifyAddress('::ffff:10.1.2.3%eth0', host)).toBe('host');
    expect(classifyAddress('::1:7f00:1', host)).toBe('remote');
    expect(classifyAddress('::2', host)).toBe('unspecified'); // compatible form of 0.0.0.2
    expect(classifyAddress('2606:4700::1111', host)).toBe('remote');
  });
});

describe('what a refusal says', () => {
  const access: HostAccess = {
    allowHostLoopback: false,
    allowHostPorts: [],
    protectedPorts: [8787],
  };
  const none = new Set<string>();

  it('names the address, the kind of host address and the port', () => {
    const r = checkAddresses(access, ['127.0.0.2'], 3000, none);
    expect(r).toEqual({
      code: 'host_local',
      message: '127.0.0.2 is the host (loopback); port 3000 is not allowed',
    });
    expect(checkAddresses(access, ['0.0.0.0'], 22, none)?.message).toBe(
      '0.0.0.0 is the host (unspecified); port 22 is not allowed',
    );
  });

  it("names the port for burrow's own, the address for link-local", () => {
    expect(checkAddresses(access, ['::1'], 8787, none)).toEqual({
      code: 'protected_port',
      message: "port 8787 of the host is burrow's own",
    });
    expect(checkAddresses(access, ['169.254.169.254'], 80, none)).toEqual({
      code: 'link_local',
      message: '169.254.169.254 is link-local (never reachable)',
    });
  });
});
