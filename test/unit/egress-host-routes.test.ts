/**
 * The networks the host routes to (egress/host-routes.ts), read from routing tables written here
 * as the kernel prints them: a routed operator network and a point-to-point peer are the host's
 * (and so `private` to an instance), the default route, a VPN's split default, `lo`, link-local
 * and multicast are not, nor what the tables of policy routing hold but unicast routes; then
 * `hostAddresses` with such routes classes their addresses `private`,
 * and the tables are read again once a reading is `ROUTES_FRESH_MS` old.
 */
import { endianness } from 'node:os';
import { describe, expect, it } from 'vitest';
import { classifyAddress, hostAddresses } from '../../src/server/sandbox/egress/address.js';
import {
  parseIpv4Routes,
  parseIpv4RuleTables,
  parseIpv6Routes,
  readTable,
  ROUTES_FRESH_MS,
  routedNetworks,
} from '../../src/server/sandbox/egress/host-routes.js';

const HEADER =
  'Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT';
/** One line of /proc/net/route: destination, gateway and mask in little-endian hex. */
const v4 = (iface: string, dest: string, gateway: string, mask: string) =>
  `${iface}\t${dest}\t${gateway}\t0003\t0\t0\t0\t${mask}\t0\t0\t0`;

const IPV4_TABLE = [
  HEADER,
  v4('eth0', '00000000', '010200C0', '00000000'), // default via 192.0.2.1
  v4('tun0', '00000000', '0100080A', '00000080'), // 0.0.0.0/1 (a VPN's split default)
  v4('tun0', '00000080', '0100080A', '00000080'), // 128.0.0.0/1
  v4('tun0', '00000002', '0100080A', '000000FE'), // 2.0.0.0/7: still too wide
  v4('eth0', '000200C0', '00000000', '00FFFFFF'), // 192.0.2.0/24, on the link
  v4('vh0', '0000010B', '0200000B', '00FFFFFF'), // 11.1.0.0/24 via 11.0.0.2
  v4('vh0', '0200000C', '00000000', 'FFFFFFFF'), // 12.0.0.2/32, a point-to-point peer
  v4('vh0', '0000000D', '0200000B', '000000FF'), // 13.0.0.0/8: as wide as a network gets
  v4('lo', '0000007F', '00000000', '000000FF'), // 127.0.0.0/8 on lo
  '',
].join('\n');

/** One line of /proc/net/ipv6_route. */
const v6 = (dest: string, prefix: string, dev: string, hop = '0'.repeat(32)) =>
  `${dest} ${prefix} ${'0'.repeat(32)} 00 ${hop} 00000100 00000001 00000000 00000001 ${dev.padStart(8)}`;

const IPV6_TABLE = [
  v6('0'.repeat(32), '00', 'eth0', `fd00${'0'.repeat(27)}1`), // ::/0 via fd00::1
  v6('0'.repeat(32), '01', 'tun0'), // ::/1
  v6(`8${'0'.repeat(31)}`, '01', 'tun0'), // 8000::/1
  v6(`2${'0'.repeat(31)}`, '03', 'tun0'), // 2000::/3
  v6(`2a01${'0'.repeat(28)}`, '0f', 'tun0'), // 2a00::/15: one bit too wide
  v6(`fd12${'0'.repeat(28)}`, '40', 'eth0'), // fd12::/64
  v6(`20010db8000100${'0'.repeat(18)}`, '10', 'eth0'), // 2001::/16, as wide as it gets
  v6(`fe80${'0'.repeat(28)}`, '40', 'eth0'), // fe80::/64
  v6(`febf${'0'.repeat(28)}`, '40', 'eth0'), // still link-local (fe80::/10)
  v6(`ff00${'0'.repeat(28)}`, '08', 'eth0'), // multicast
  v6(`ff02${'0'.repeat(27)}1`, '80', 'eth0'), // a multicast group
  v6(`${'0'.repeat(31)}1`, '80', 'lo'), // ::1 on lo
  v6(`2a00145040010000${'0'.repeat(15)}2`, '80', 'ppp0'), // a point-to-point peer
  '',
].join('\n');

describe('the IPv4 routing table', () => {
  it('yields the routed networks and peers, not the default, its split, nor lo', () => {
    expect(parseIpv4Routes(IPV4_TABLE)).toEqual([
      { address: '192.0.2.0', prefix: 24, family: 4 },
      { address: '11.1.0.0', prefix: 24, family: 4 },
      { address: '12.0.0.2', prefix: 32, family: 4 },
      { address: '13.0.0.0', prefix: 8, family: 4 },
    ]);
  });

  it('reads a big-endian host in its own byte order', () => {
    const table = [HEADER, v4('vh0', '0B010000', '0B000002', 'FFFFFF00'), ''].join('\n');
    expect(parseIpv4Routes(table, 'BE')).toEqual([{ address: '11.1.0.0', prefix: 24, family: 4 }]);
  });

  it('skips its header and lines that do not read as routes', () => {
    const table = [
      v4('vh0', '0000010B', '0200000B', '00FFFFFF'), // where the header belongs: not read
      v4('vh0', '0000010G', '0200000B', '00FFFFFF'),
      v4('vh0', '0000010B', '0200000B', '00FFFFF'),
      v4('vh0', '0000010B0', '0200000B', '00FFFFFF'),
      v4('vh0', '0000010B', '0200000B', '000FFFFFF'),
      'vh0\t0000010B',
      '   ',
      v4('vh0', '0000020B', '0200000B', '00FFFFFF'),
      // whitespace around and between the fields is a separator, however much
      `  ${v4('vh0', '0000030B', '0200000B', '00FFFFFF').replace(/\t/g, ' \t ')}  `,
    ].join('\n');
    expect(parseIpv4Routes(table)).toEqual([
      { address: '11.2.0.0', prefix: 24, family: 4 },
      { address: '11.3.0.0', prefix: 24, family: 4 },
    ]);
    expect(parseIpv4Routes('')).toEqual([]);
  });
});

describe('the IPv6 routing table', () => {
  it('yields the routed networks and peers, not ::/0, wide splits, lo, link-local, multicast', () => {
    expect(parseIpv6Routes(IPV6_TABLE)).toEqual([
      { address: 'fd12:0:0:0:0:0:0:0', prefix: 64, family: 6 },
      { address: '2001:db8:1:0:0:0:0:0', prefix: 16, family: 6 },
      { address: '2a00:1450:4001:0:0:0:0:2', prefix: 128, family: 6 },
    ]);
  });

  it('skips lines that do not read as routes', () => {
    const good = v6(`fd12${'0'.repeat(28)}`, '40', 'eth0');
    const table = [
      good.replace('fd12', 'fg12'),
      good.replace(' 40 ', ' 4 '),
      good.replace(' 40 ', ' 81 '), // longer than an address
      good.replace(' 40 ', ' 040 '),
      good.replace('fd12', 'fd123'),
      good.replace(/ +eth0$/, ''),
      `${good} extra`,
      good.replace('fd12', 'fd13'),
      `  ${good.replace('fd12', 'fd14')}  `,
    ].join('\n');
    expect(parseIpv6Routes(table)).toEqual([
      { address: 'fd13:0:0:0:0:0:0:0', prefix: 64, family: 6 },
      { address: 'fd14:0:0:0:0:0:0:0', prefix: 64, family: 6 },
    ]);
  });
});

/** /proc/net/fib_trie of a host with two policy-routing tables beside Main and Local. */
const FIB_TRIE = `Id 100:
  +-- 11.0.0.0/8 2 0 2
     |-- 11.7.0.0
        /24 universe UNICAST
     |-- 11.8.0.0
        /16 universe BLACKHOLE
        /24 link UNICAST
Id 52:
  +-- 0.0.0.0/0 3 0 5
     |-- 0.0.0.0
        /0 universe UNICAST
     |-- 2.0.0.0
        /7 universe UNICAST
     |-- 100.101.102.103
        /32 link UNICAST
     |-- 14.0.0.0
        /8 universe UNREACHABLE
Main:
  +-- 8.0.0.0/5 2 0 2
     |-- 10.9.0.0
        /30 link UNICAST
     |-- 13.7.7.0
        /24 universe UNICAST
Local:
  +-- 0.0.0.0/1 2 0 2
     |-- 10.9.0.1
        /32 host LOCAL
     |-- 16.0.0.0
        /24 link UNICAST
Id 7:
  |-- not an address
     /24 link UNICAST
  |-- 15.1.0.0
     /33 link UNICAST
     /8 link UNICAST
`;

describe('the IPv4 tables of policy routing (fib_trie)', () => {
  it("yields their unicast routes, not Main's (read with devices elsewhere) nor Local's", () => {
    expect(parseIpv4RuleTables(FIB_TRIE)).toEqual([
      { address: '11.7.0.0', prefix: 24, family: 4 },
      { address: '11.8.0.0', prefix: 24, family: 4 },
      { address: '100.101.102.103', prefix: 32, family: 4 },
      { address: '15.1.0.0', prefix: 8, family: 4 },
    ]);
    expect(parseIpv4RuleTables('')).toEqual([]);
  });
});

describe('hostAddresses with routes', () => {
  it("classes a routed network and a peer private, and nothing else the host's", () => {
    const routes = [
      ...parseIpv4Routes(IPV4_TABLE),
      ...parseIpv4RuleTables(FIB_TRIE),
      ...parseIpv6Routes(IPV6_TABLE),
    ];
    const host = hostAddresses(routes);
    for (const a of [
      '11.1.0.2',
      '[::ffff:11.1.0.2]',
      '12.0.0.2',
      '2a00:1450:4001::2',
      '11.7.0.9',
    ]) {
      expect(classifyAddress(a, host), a).toBe('private');
    }
    for (const a of ['11.2.0.1', '12.0.0.3', '1.1.1.1', '2a00:1450:4001::3', '2606:4700::1']) {
      expect(classifyAddress(a, host), a).toBe('remote');
    }
    expect(classifyAddress('11.1.0.2', hostAddresses([]))).toBe('remote');
  });

  it("reads this machine's tables as they are", () => {
    // whatever they hold: both tables read, and each network is one of the host's
    const fresh = routedNetworks(2e12);
    expect(fresh).toEqual([
      ...parseIpv4Routes(readTable('/proc/net/route'), endianness()),
      ...parseIpv4RuleTables(readTable('/proc/net/fib_trie')),
      ...parseIpv6Routes(readTable('/proc/net/ipv6_route')), // absent without IPv6
    ]);
    const host = hostAddresses();
    for (const net of fresh) {
      const family = net.family === 4 ? 'ipv4' : 'ipv6';
      expect(host.onHostNetwork?.(net.address, family), net.address).toBe(true);
    }
  });
});

describe('reading the tables', () => {
  it('once per ROUTES_FRESH_MS, then again (a clock going back reads again too)', () => {
    const t = 1e12; // far from every reading before: this one is fresh
    const first = routedNetworks(t);
    expect(routedNetworks(t)).toBe(first);
    expect(routedNetworks(t + ROUTES_FRESH_MS - 1)).toBe(first);
    const second = routedNetworks(t + ROUTES_FRESH_MS);
    expect(second).not.toBe(first);
    expect(second).toEqual(first);
    expect(routedNetworks(t)).not.toBe(second);
  });

  it('as nothing where a table is absent, and fails loudly where it cannot be read', () => {
    expect(readTable('/proc/net/no-such-table')).toBe('');
    expect(() => readTable('/proc/net')).toThrow(/EISDIR/);
    expect(readTable('/proc/net/route')).toMatch(/^Iface\tDestination\t/);
  });
});
