/**
 * The address model (egress/address.ts) and the rules over it (policy.ts `checkAddresses`): every
 * spelling the kernel connects to the same place is judged as that place, against each refused
 * class: this host, the cluster's endpoints, link-local and metadata, private networks.
 */
import { describe, expect, it } from 'vitest';
import {
  classifyAddress,
  clientKey,
  kernelAddress,
  networkMatcher,
  parseCidr,
} from '../../src/server/sandbox/egress/address.js';
import { checkAddresses, type HostAccess } from '../../src/server/sandbox/egress/policy.js';

const none = new Set<string>();
const access = (over: Partial<HostAccess> = {}): HostAccess => ({
  allowHostLoopback: false,
  allowHostPorts: [],
  protectedPorts: [8787],
  ...over,
});

/** Every spelling of one destination, each as a resolver or a URL would read it. */
const SPELLINGS = {
  unspecified: [
    '0',
    '0.0.0.0',
    '::',
    '0:0:0:0:0:0:0:0',
    '[::]',
    '::ffff:0.0.0.0',
    '0x0',
    '00',
    '0x',
  ],
  loopback: [
    '127.0.0.1',
    '::ffff:127.0.0.1',
    '::ffff:7f00:1',
    '2130706433',
    '0x7f.1',
    '0x7f000001',
    '017700000001',
    '0177.0.0.1',
    '127.1',
    '[::1]',
    '::1',
    '0:0:0:0:0:0:0:1',
    '[::ffff:127.0.0.1]',
    '64:ff9b::7f00:1',
  ],
  private: [
    '10.0.0.1',
    '10.1',
    '0xa000001',
    '167772161',
    '012.0.0.1',
    '::ffff:10.0.0.1',
    '::ffff:a00:1',
    '[::ffff:10.0.0.1]',
    '172.16.0.1',
    '172.31.255.255',
    '192.168.0.1',
    '100.64.0.1',
    '100.127.255.254',
    'fc00::1',
    'fd12:3456::1',
    '10.88.0.1',
    // 6to4 and Teredo carry on to the IPv4 address they embed (a relay delivers them)
    '2002:a63:2::',
    '2002:a00:1:5::1',
    '2002:7f00:1::',
    '2002:0:0::1',
    '2002:c0a8:1::',
    '2001:0:a00:1::f7f7:f7f7', // Teredo: its server private, its client 8.8.8.8 (inverted)
    '2001:0:808:808::80ff:fffe', // Teredo: its server 8.8.8.8, its client 127.0.0.1 (inverted)
    '2001::a00:1:0:0:f7f7:f7f7',
  ],
  'link-local': [
    '169.254.169.254',
    '0xa9fea9fe',
    '2852039166',
    '169.254.43518',
    '0251.0376.0251.0376',
    '::ffff:169.254.169.254',
    '::ffff:a9fe:a9fe',
    '[::ffff:a9fe:a9fe]',
    'fe80::1',
    'fd00:ec2::254',
    '[fd00:ec2::254]',
    '2002:a9fe:a9fe::',
    '2001:0:808:808::5601:5601', // Teredo: its client 169.254.169.254 (inverted)
  ],
  remote: [
    '8.8.8.8',
    '134744072',
    '::ffff:8.8.8.8',
    '2001:4860:4860::8888',
    '100.128.0.1',
    '2002:808:808::1',
    '2001:0:808:808::f7f7:f7f7',
    '2003:a00:1::', // neither 6to4 nor Teredo: nothing embedded
    '2001:1:a00:1::f7f7:f7f7',
  ],
} as const;

describe('kernelAddress', () => {
  it('reads every numeric spelling as the address the kernel connects to', () => {
    const cases: [string, string][] = [
      ['0', '0.0.0.0'],
      ['2130706433', '127.0.0.1'],
      ['0x7f.1', '127.0.0.1'],
      ['017700000001', '127.0.0.1'],
      ['127.1', '127.0.0.1'],
      ['[::1]', '0:0:0:0:0:0:0:1'],
      ['10.1', '10.0.0.1'],
      ['0xa000001', '10.0.0.1'],
      ['::ffff:10.0.0.1', '10.0.0.1'],
      ['64:ff9b::a00:1', '10.0.0.1'],
      ['::', '0:0:0:0:0:0:0:0'],
    ];
    for (const [spelling, address] of cases)
      expect(kernelAddress(spelling), spelling).toBe(address);
  });

  it('is undefined for names', () => {
    for (const name of ['example.com', 'localhost', '1.2.3.4.5', 'deadbeef.test']) {
      expect(kernelAddress(name), name).toBeUndefined();
    }
  });
});

describe('classifyAddress in every spelling', () => {
  for (const [kind, spellings] of Object.entries(SPELLINGS)) {
    it(`finds ${kind}`, () => {
      for (const s of spellings) expect(classifyAddress(s, none), s).toBe(kind);
    });
  }

  it('knows the host by its own addresses in every spelling, before any private range', () => {
    const host = new Set(['10.88.0.5']);
    for (const s of ['10.88.0.5', '10.88.5', '::ffff:a58:5', '0xa580005']) {
      expect(classifyAddress(s, host), s).toBe('host');
    }
    // through a 6to4 relay the host's own address is a network beyond this host, never remote
    expect(classifyAddress('2002:a58:5::', host)).toBe('private');
  });
});

describe('checkAddresses against each refused class', () => {
  it('refuses this host on a port not allowed, in every spelling', () => {
    for (const s of [...SPELLINGS.unspecified, ...SPELLINGS.loopback]) {
      expect(checkAddresses(access(), [s], 3000, none)?.code, s).toBe('host_local');
      expect(checkAddresses(access({ allowHostLoopback: true }), [s], 8787, none)?.code, s).toBe(
        'protected_port',
      );
    }
  });

  it("opens an allowed host port on loopback only, not on the host's other addresses", () => {
    const host = new Set(['10.88.0.5', 'fd00:0:0:0:0:0:0:2']);
    const port = access({ allowHostPorts: [9911] });
    for (const s of [...SPELLINGS.unspecified, ...SPELLINGS.loopback]) {
      expect(checkAddresses(port, [s], 9911, host), s).toBeUndefined();
    }
    for (const s of ['10.88.0.5', '::ffff:10.88.0.5', '0xa580005', 'fd00::2']) {
      const refused = checkAddresses(port, [s], 9911, host);
      expect(refused?.code, s).toBe('host_local');
      expect(refused?.message, s).toContain('opened on loopback only');
    }
    // --allow-host-loopback opens the host whole, as before
    expect(checkAddresses(access({ allowHostLoopback: true }), ['10.88.0.5'], 9911, host)).toBe(
      undefined,
    );
  });

  it("refuses the cluster's loopback endpoints on every spelling of this host", () => {
    const open = access({
      allowHostLoopback: true,
      refusedEndpoints: [
        { address: '127.0.0.1', port: 5432 },
        { address: '::1', port: 8788 },
      ],
    });
    for (const s of [...SPELLINGS.unspecified, ...SPELLINGS.loopback]) {
      expect(checkAddresses(open, [s], 5432, none)?.code, s).toBe('cluster_endpoint');
      expect(checkAddresses(open, [s], 8788, none)?.code, s).toBe('cluster_endpoint');
      expect(checkAddresses(open, [s], 5433, none), s).toBeUndefined();
    }
    // the host's interface addresses are this host too
    const host = new Set(['192.168.1.5']);
    expect(checkAddresses(open, ['192.168.1.5'], 5432, host)?.code).toBe('cluster_endpoint');
  });

  it('refuses a remote endpoint of the cluster on every port, in every spelling', () => {
    const open = access({
      allowNetworks: ['10.0.0.0/8'],
      refusedEndpoints: [{ address: '10.0.0.1' }],
    });
    for (const s of ['10.0.0.1', '10.1', '0xa000001', '::ffff:10.0.0.1', '::ffff:a00:1']) {
      expect(checkAddresses(open, [s], 1234, none)?.code, s).toBe('cluster_endpoint');
    }
    expect(checkAddresses(open, ['10.0.0.2'], 1234, none)).toBeUndefined();
  });

  it('refuses link-local and metadata whatever was allowed', () => {
    const open = access({
      allowHostLoopback: true,
      allowHostPorts: [80],
      allowNetworks: ['0.0.0.0/0', '::/0', '169.254.0.0/16', 'fd00::/8'],
    });
    for (const s of SPELLINGS['link-local']) {
      expect(checkAddresses(open, [s], 80, none)?.code, s).toBe('link_local');
    }
  });

  it('refuses private networks by default, allows them by CIDR, and nothing more', () => {
    for (const s of SPELLINGS.private) {
      expect(checkAddresses(access({ allowHostLoopback: true }), [s], 80, none)?.code, s).toBe(
        'private_network',
      );
    }
    const tens = access({ allowNetworks: ['10.0.0.0/8'] });
    for (const s of ['10.0.0.1', '10.1', '0xa000001', '::ffff:10.0.0.1', '10.88.0.1']) {
      expect(checkAddresses(tens, [s], 80, none), s).toBeUndefined();
    }
    for (const s of ['192.168.0.1', '172.16.0.1', '100.64.0.1', 'fc00::1', '2002:a00:1::']) {
      expect(checkAddresses(tens, [s], 80, none)?.code, s).toBe('private_network');
    }
    // a tunnelled address is reached only where its own IPv6 network is allowed
    const sixToFour = access({ allowNetworks: ['2002::/16'] });
    expect(checkAddresses(sixToFour, ['2002:a00:1::'], 80, none)).toBeUndefined();
    expect(checkAddresses(sixToFour, ['2002:a9fe:a9fe::'], 80, none)?.code).toBe('link_local');
    // a wide network lifts only the private rule: this host stays refused
    const wide = access({ allowNetworks: ['0.0.0.0/0', '::/0'] });
    expect(checkAddresses(wide, ['192.168.0.1', 'fd00::1'], 80, none)).toBeUndefined();
    expect(checkAddresses(wide, ['0.0.0.0'], 80, none)?.code).toBe('host_local');
    expect(checkAddresses(wide, ['127.0.0.1'], 80, none)?.code).toBe('host_local');
  });

  it('refuses a name that resolves to a private address among public ones', () => {
    expect(checkAddresses(access(), ['8.8.8.8', '10.0.0.1'], 80, none)?.code).toBe(
      'private_network',
    );
  });
});

describe('parseCidr and networkMatcher', () => {
  it('reads CIDRs and bare addresses, refuses the rest', () => {
    expect(parseCidr('10.0.0.0/8')).toEqual({ address: '10.0.0.0', prefix: 8, family: 4 });
    expect(parseCidr('fd00::/8')).toEqual({ address: 'fd00:0:0:0:0:0:0:0', prefix: 8, family: 6 });
    expect(parseCidr('10.1.2.3')).toEqual({ address: '10.1.2.3', prefix: 32, family: 4 });
    for (const bad of ['10.0.0.0/33', '::/129', 'example.com/8', '10/8', '10.0.0.0/', '']) {
      expect(parseCidr(bad), bad).toBeUndefined();
    }
  });

  it('matches any spelling of an address inside', () => {
    const m = networkMatcher(['10.77.0.0/16', 'fd00:1::/32', 'nonsense']);
    for (const s of ['10.77.0.2', '10.77.2', '::ffff:10.77.0.2', 'fd00:1::5'])
      expect(m(s), s).toBe(true);
    for (const s of ['10.78.0.1', 'fd00:2::1', 'nonsense']) expect(m(s), s).toBe(false);
  });
});

describe('the client an address counts as (caps per client)', () => {
  it('is this host for every loopback address, IPv4 for mapped, the /64 for IPv6', () => {
    for (const a of ['127.0.0.1', '127.0.0.2', '127.255.1.9', '::1', '::ffff:127.0.0.3'])
      expect(clientKey(a), a).toBe('this host');
    for (const a of ['198.51.100.7', '::ffff:198.51.100.7', '::FFFF:c633:6407'])
      expect(clientKey(a), a).toBe('198.51.100.7');
    for (const a of ['2001:db8:1:2::1', '2001:db8:1:2:ffff:1:2:3', '2001:DB8:1:2:0:0:0:9'])
      expect(clientKey(a), a).toBe('2001:db8:1:2::/64');
    expect(clientKey('2001:db8:1:3::1')).toBe('2001:db8:1:3::/64');
    expect(clientKey('unknown')).toBe('unknown');
  });
});
