/**
 * The special-purpose networks of the address model (egress/address.ts), range by range: each
 * one's first and last address is `private` (reached only where the operator allowed it by CIDR),
 * and the address just outside it keeps the class it has of its own; and among IPv6 peers only
 * `::1` counts as this host for the caps per client (`::` is an ordinary /64).
 *
 * The module is imported inside each test, not at the top of the file: the ranges are built when
 * it loads, so a range that is no valid subnet makes loading throw, and that must fail a test
 * here rather than leave the file with no test run at all.
 */
import { describe, expect, it } from 'vitest';

const load = () => import('../../src/server/sandbox/egress/address.js');

/** A range, addresses inside it (its first and last), and neighbours outside with their class. */
type Range = [cidr: string, inside: string[], outside: [address: string, kind: string][]];

const IPV4: Range[] = [
  [
    '10.0.0.0/8',
    ['10.0.0.0', '10.255.255.255'],
    [
      ['9.255.255.255', 'remote'],
      ['11.0.0.0', 'remote'],
    ],
  ],
  [
    '172.16.0.0/12',
    ['172.16.0.0', '172.31.255.255'],
    [
      ['172.15.255.255', 'remote'],
      ['172.32.0.0', 'remote'],
    ],
  ],
  [
    '192.168.0.0/16',
    ['192.168.0.0', '192.168.255.255'],
    [
      ['192.167.255.255', 'remote'],
      ['192.169.0.0', 'remote'],
    ],
  ],
  [
    '100.64.0.0/10',
    ['100.64.0.0', '100.127.255.255'],
    [
      ['100.63.255.255', 'remote'],
      ['100.128.0.0', 'remote'],
    ],
  ],
  [
    '192.0.0.0/24',
    ['192.0.0.0', '192.0.0.255'],
    [
      ['191.255.255.255', 'remote'],
      ['192.0.1.0', 'remote'],
    ],
  ],
  [
    '192.0.2.0/24',
    ['192.0.2.0', '192.0.2.255'],
    [
      ['192.0.1.255', 'remote'],
      ['192.0.3.0', 'remote'],
    ],
  ],
  [
    '198.51.100.0/24',
    ['198.51.100.0', '198.51.100.255'],
    [
      ['198.51.99.255', 'remote'],
      ['198.51.101.0', 'remote'],
    ],
  ],
  [
    '203.0.113.0/24',
    ['203.0.113.0', '203.0.113.255'],
    [
      ['203.0.112.255', 'remote'],
      ['203.0.114.0', 'remote'],
    ],
  ],
  [
    '198.18.0.0/15',
    ['198.18.0.0', '198.19.255.255'],
    [
      ['198.17.255.255', 'remote'],
      ['198.20.0.0', 'remote'],
    ],
  ],
  ['224.0.0.0/4', ['224.0.0.0', '239.255.255.255'], [['223.255.255.255', 'remote']]],
  ['240.0.0.0/4', ['240.0.0.0', '255.255.255.255'], []],
];

const IPV6: Range[] = [
  [
    'fc00::/7',
    ['fc00::', 'fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff'],
    [
      ['fbff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', 'remote'],
      ['fe00::', 'remote'],
    ],
  ],
  [
    'fec0::/10',
    ['fec0::', 'feff:ffff:ffff:ffff:ffff:ffff:ffff:ffff'],
    [['febf:ffff:ffff:ffff:ffff:ffff:ffff:ffff', 'link-local']],
  ],
  [
    '64:ff9b:1::/48',
    ['64:ff9b:1::', '64:ff9b:1:ffff:ffff:ffff:ffff:ffff'],
    [
      ['64:ff9b:0:ffff:ffff:ffff:ffff:ffff', 'remote'],
      ['64:ff9b:2::', 'remote'],
    ],
  ],
  [
    '100::/64',
    ['100::', '100::ffff:ffff:ffff:ffff'],
    [
      ['ff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', 'remote'],
      ['100:0:0:1::', 'remote'],
    ],
  ],
  [
    '2001:2::/48',
    ['2001:2::', '2001:2:0:ffff:ffff:ffff:ffff:ffff'],
    [
      ['2001:1:ffff:ffff:ffff:ffff:ffff:ffff', 'remote'],
      ['2001:2:1::', 'remote'],
    ],
  ],
  [
    '2001:db8::/32',
    ['2001:db8::', '2001:db8:ffff:ffff:ffff:ffff:ffff:ffff'],
    [
      ['2001:db7:ffff:ffff:ffff:ffff:ffff:ffff', 'remote'],
      ['2001:db9::', 'remote'],
    ],
  ],
  [
    '3fff::/20',
    ['3fff::', '3fff:fff:ffff:ffff:ffff:ffff:ffff:ffff'],
    [
      ['3ffe:ffff:ffff:ffff:ffff:ffff:ffff:ffff', 'remote'],
      ['3fff:1000::', 'remote'],
    ],
  ],
  ['ff00::/8', ['ff00::', 'ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff'], []],
];

describe('the networks no one routes on the internet are private, edge to edge', () => {
  for (const [family, ranges] of [
    ['IPv4', IPV4],
    ['IPv6', IPV6],
  ] as const) {
    it(`${family}: ${ranges.map(([cidr]) => cidr).join(', ')}`, async () => {
      const { classifyAddress } = await load();
      const none = new Set<string>();
      for (const [cidr, inside, outside] of ranges) {
        for (const address of inside) expect(classifyAddress(address, none), cidr).toBe('private');
        for (const [address, kind] of outside) {
          expect(classifyAddress(address, none), `${address} beside ${cidr}`).toBe(kind);
        }
      }
    });
  }

  it('and an operator allows each by its own CIDR', async () => {
    const { networkMatcher } = await load();
    for (const [cidr, inside, outside] of [...IPV4, ...IPV6]) {
      const allowed = networkMatcher([cidr]);
      for (const address of inside) expect(allowed(address), `${address} in ${cidr}`).toBe(true);
      for (const [address] of outside)
        expect(allowed(address), `${address} by ${cidr}`).toBe(false);
    }
  });
});

describe('the client an IPv6 peer counts as', () => {
  it('is this host for ::1 only; :: is the /64 of zeros', async () => {
    const { clientKey } = await load();
    expect(clientKey('::1')).toBe('this host');
    expect(clientKey('::')).toBe('0:0:0:0::/64');
    expect(clientKey('0:0:0:0:0:0:0:0')).toBe('0:0:0:0::/64');
    expect(clientKey('::2:0:1')).toBe('0:0:0:0::/64');
  });
});
