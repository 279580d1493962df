/**
 * What an instance is told when the egress refuses an address (policy.ts `checkAddresses`): the
 * code and the whole message, for each refused class, and the cluster's endpoints matched by the
 * address the kernel would reach, whichever spelling the operator or the instance used.
 */
import { describe, expect, it } from 'vitest';
import { checkAddresses, type HostAccess } from '../../src/server/sandbox/egress/policy.js';

const none = new Set<string>();
const access = (over: Partial<HostAccess> = {}): HostAccess => ({
  allowHostLoopback: false,
  allowHostPorts: [],
  protectedPorts: [8787],
  ...over,
});

describe('the refusal an instance reads', () => {
  it('names the address, and the port only where the endpoint has one', () => {
    const a = access({
      allowHostLoopback: true,
      refusedEndpoints: [{ address: '127.0.0.1', port: 5432 }, { address: '10.0.0.1' }],
      allowNetworks: ['10.0.0.0/8'],
    });
    expect(checkAddresses(a, ['0.0.0.0'], 5432, none)).toEqual({
      code: 'cluster_endpoint',
      message: '0.0.0.0 port 5432 belongs to this burrow cluster (its database or a node)',
    });
    expect(checkAddresses(a, ['10.0.0.1'], 443, none)).toEqual({
      code: 'cluster_endpoint',
      message: '10.0.0.1 belongs to this burrow cluster (its database or a node)',
    });
  });

  it('one message per refused class', () => {
    expect(checkAddresses(access(), ['169.254.169.254'], 80, none)).toEqual({
      code: 'link_local',
      message: '169.254.169.254 is link-local (never reachable)',
    });
    expect(checkAddresses(access(), ['10.1.2.3'], 80, none)).toEqual({
      code: 'private_network',
      message: '10.1.2.3 is in a private network; port 80 is not allowed',
    });
    expect(checkAddresses(access({ allowHostLoopback: true }), ['127.0.0.1'], 8787, none)).toEqual({
      code: 'protected_port',
      message: "port 8787 of the host is burrow's own",
    });
    expect(checkAddresses(access(), ['127.0.0.1'], 9000, none)).toEqual({
      code: 'host_local',
      message: '127.0.0.1 is the host (loopback); port 9000 is not allowed',
    });
  });
});

describe("the cluster's endpoints", () => {
  it('as the operator spelled them: the address the kernel reaches, not the text', () => {
    // no port: every port of it, compared by the address it is, whatever the spellings
    const a = access({ allowHostLoopback: true, refusedEndpoints: [{ address: '0x7f.1' }] });
    for (const s of ['127.0.0.1', '127.1', '2130706433']) {
      expect(checkAddresses(a, [s], 1234, none)?.code, s).toBe('cluster_endpoint');
    }
    // another loopback address is another address: open, as the operator allowed loopback
    expect(checkAddresses(a, ['127.0.0.2'], 1234, none)).toBeUndefined();
  });

  it("with a port: that port of this host on any of this host's addresses, no other port", () => {
    const a = access({
      allowHostLoopback: true,
      refusedEndpoints: [{ address: '127.0.0.1', port: 5432 }],
    });
    expect(checkAddresses(a, ['127.0.0.2'], 5432, none)?.code).toBe('cluster_endpoint');
    expect(checkAddresses(a, ['127.0.0.2'], 5433, none)).toBeUndefined();
    // a remote address on that port is not this host
    expect(checkAddresses(a, ['93.184.216.34'], 5432, none)).toBeUndefined();
  });

  it('a remote endpoint without a port is not the host: this host stays open on that port', () => {
    const a = access({ allowHostLoopback: true, refusedEndpoints: [{ address: '10.0.0.1' }] });
    expect(checkAddresses(a, ['127.0.0.1'], 5432, none)).toBeUndefined();
  });
});
