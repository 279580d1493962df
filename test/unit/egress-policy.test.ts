/** The egress's pure rules: host spelling, blocked domains, address classes, host access. */
import { describe, expect, it } from 'vitest';
import {
  blockedDomainMatcher,
  canonicalIp,
  checkAddresses,
  classifyAddress,
  hostAddresses,
  normalizeHost,
  type HostAccess,
} from '../../src/server/sandbox/egress/policy.js';

describe('normalizeHost', () => {
  it('gives one spelling per host', () => {
    expect(normalizeHost('Example.COM.')).toBe('example.com');
    expect(normalizeHost('[::1]')).toBe('::1');
    expect(normalizeHost('::FFFF:127.0.0.1')).toBe('::ffff:127.0.0.1');
    expect(normalizeHost('bücher.de')).toBe('xn--bcher-kva.de');
    expect(normalizeHost('0x7f.1')).toBe('127.0.0.1');
    expect(normalizeHost('2130706433')).toBe('127.0.0.1');
  });

  it('refuses what is no host', () => {
    for (const bad of ['', '.', 'a b.com', 'a..b', '.a.com', 'a/b', 'x'.repeat(300), '[::1']) {
      expect(normalizeHost(bad), bad).toBeUndefined();
    }
  });
});

describe('blockedDomainMatcher', () => {
  const blocked = blockedDomainMatcher(['Example.com', 'evil.test.', 'bücher.de', 'not a host']);

  it('blocks the domain and every subdomain, in any spelling', () => {
    expect(blocked('example.com')).toBe('example.com');
    expect(blocked('WWW.EXAMPLE.COM.')).toBe('example.com');
    expect(blocked('a.b.c.example.com')).toBe('example.com');
    expect(blocked('evil.test')).toBe('evil.test');
    expect(blocked('x.evil.test..')).toBe('evil.test');
    expect(blocked('shop.bücher.de')).toBe('xn--bcher-kva.de');
    expect(blocked('shop.xn--bcher-kva.de')).toBe('xn--bcher-kva.de');
  });

  it('leaves other names alone', () => {
    for (const ok of ['notexample.com', 'example.com.evil', 'com', 'example.org', '127.0.0.1']) {
      expect(blocked(ok), ok).toBeUndefined();
    }
    expect(blockedDomainMatcher([])('example.com')).toBeUndefined();
  });
});

describe('classifyAddress', () => {
  const host = new Set(['10.1.2.3', canonicalIp('fe80::abcd')!, canonicalIp('2001:db8::5')!]);

  it('finds every spelling of the host', () => {
    const cases: [string, string][] = [
      ['127.0.0.1', 'loopback'],
      ['127.255.255.254', 'loopback'],
      ['::1', 'loopback'],
      ['0:0:0:0:0:0:0:1', 'loopback'],
      ['::ffff:127.0.0.1', 'loopback'],
      ['::ffff:7f00:1', 'loopback'],
      ['::127.0.0.1', 'loopback'],
      ['0.0.0.0', 'unspecified'],
      ['0.1.2.3', 'unspecified'],
      ['::', 'unspecified'],
      ['::ffff:0.0.0.0', 'unspecified'],
      ['10.1.2.3', 'host'],
      ['::ffff:10.1.2.3', 'host'],
      ['::ffff:a01:203', 'host'],
      ['fe80::abcd', 'host'],
      ['fe80::abcd%eth0', 'host'],
      ['2001:DB8:0::5', 'host'],
      ['169.254.169.254', 'link-local'],
      ['::ffff:169.254.169.254', 'link-local'],
      ['fe80::1', 'link-local'],
      ['febf::1', 'link-local'],
      ['8.8.8.8', 'remote'],
      ['10.1.2.4', 'private'],
      ['192.168.1.1', 'private'],
      ['2606:4700::6', 'remote'],
      ['fec0::1', 'private'],
      ['not an address', 'unspecified'],
    ];
    for (const [address, kind] of cases) expect(classifyAddress(address, host), address).toBe(kind);
  });

  it('knows the real host has a loopback', () => {
    const real = hostAddresses();
    expect(real.has('127.0.0.1')).toBe(true);
    expect(classifyAddress('127.0.0.1', real)).toBe('loopback');
  });
});

describe('checkAddresses', () => {
  const none = new Set<string>();
  const access = (over: Partial<HostAccess>): HostAccess => ({
    allowHostLoopback: false,
    allowHostPorts: [],
    protectedPorts: [8787],
    ...over,
  });

  it('lets remote addresses through on any port, protected ones included', () => {
    expect(checkAddresses(access({}), ['8.8.8.8', '2606:4700::1111'], 8787, none)).toBeUndefined();
  });

  it('refuses the host unless allowed, whole or by port', () => {
    expect(checkAddresses(access({}), ['127.0.0.1'], 3000, none)?.code).toBe('host_local');
    expect(checkAddresses(access({ allowHostPorts: [3000] }), ['::1'], 3000, none)).toBeUndefined();
    expect(checkAddresses(access({ allowHostPorts: [3000] }), ['::1'], 3001, none)?.code).toBe(
      'host_local',
    );
    expect(
      checkAddresses(access({ allowHostLoopback: true }), ['0.0.0.0'], 1, none),
    ).toBeUndefined();
  });

  it('refuses if any address is the host (a name may resolve to both)', () => {
    expect(checkAddresses(access({}), ['8.8.8.8', '127.0.0.1'], 80, none)?.code).toBe('host_local');
  });

  it("never reaches burrow's own ports or link-local addresses", () => {
    const all = access({ allowHostLoopback: true, allowHostPorts: [8787, 80] });
    expect(checkAddresses(all, ['127.0.0.1'], 8787, none)?.code).toBe('protected_port');
    expect(checkAddresses(all, ['::ffff:127.0.0.1'], 8787, none)?.code).toBe('protected_port');
    expect(checkAddresses(all, ['169.254.169.254'], 80, none)?.code).toBe('link_local');
  });
});
