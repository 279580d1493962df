/**
 * The operator's networks the host reaches by a route, from the attacker's position (attack3 E4):
 * `curl` inside an ubuntu instance, through its egress, against a server in another network
 * namespace at addresses that look like anyone's on the internet (11.X/8, 12.X/8) but that this
 * host routes itself:
 * - 11.X.1.2, behind a next hop (`ip route add 11.X.1.0/24 via 11.X.0.2`: the namespace's end of
 *   the host's 11.X.0.0/30 link);
 * - 12.X.0.2, the peer of a point-to-point address on the host's end
 *   (`ip addr add 12.X.0.1 peer 12.X.0.2`), a /32 host route;
 * - 11.X.2.2, behind the same next hop but routed by policy (`ip rule add to 11.X.2.0/24 table
 *   T`, the route in table T only, as WireGuard's and Tailscale's tables are), which
 *   /proc/net/route does not show.
 * Each was classed `remote` and reached with 200 before its fix. Now all are refused (403
 * `private_network`) in their spellings and through CONNECT, and reached once the operator
 * allowed them by CIDR (`allowNetworks`), while the link's own network stays refused.
 * The host reaches both here (checked first), so a refusal is the egress's, not the network's.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { get } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testServer, type TestServer } from '../../helpers/server.js';

const PROXY = "--noproxy '' -x http://127.0.0.1:3128";
const tag = randomBytes(3).toString('hex');
const NS = `burrow-rt-${tag}`;
const VETH = `brt${tag}`;
/** The second octet, random (never 0: the tester's own setup uses 11.0/16 and 12.0/16). */
const X = 1 + (randomBytes(1)[0]! % 250);
const ROUTED = `11.${X}.1.2`;
const PEER = `12.${X}.0.2`;
const RULED = `11.${X}.2.2`;
/** The policy-routing table of RULED's network (the tester's own setup uses 100). */
const TABLE = String(1000 + X);
const NEXT_HOP = `11.${X}.0.2`;
const PORT = 8080;

let server: ChildProcess | undefined;

const ip = (...args: string[]) => execFileSync('ip', args, { stdio: 'pipe' });
const quietly = (...args: string[]) => {
  try {
    ip(...args);
  } catch {
    // never made, or gone with the link or the namespace
  }
};

function removeAll() {
  server?.kill('SIGKILL');
  server = undefined;
  quietly('route', 'del', `11.${X}.1.0/24`);
  quietly('rule', 'del', 'to', `11.${X}.2.0/24`, 'table', TABLE);
  quietly('link', 'del', VETH); // its addresses and routes go with it
  quietly('netns', 'del', NS);
}

beforeAll(async () => {
  try {
    ip('netns', 'add', NS);
    ip('link', 'add', VETH, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', NS);
    ip('addr', 'add', `11.${X}.0.1/30`, 'dev', VETH);
    ip('addr', 'add', `12.${X}.0.1`, 'peer', `${PEER}/32`, 'dev', VETH);
    ip('link', 'set', VETH, 'up');
    ip('-n', NS, 'addr', 'add', `${NEXT_HOP}/30`, 'dev', 'eth0');
    ip('-n', NS, 'addr', 'add', PEER, 'peer', `12.${X}.0.1/32`, 'dev', 'eth0');
    ip('-n', NS, 'link', 'set', 'eth0', 'up');
    ip('-n', NS, 'link', 'set', 'lo', 'up');
    // the operator's network behind the next hop: an address of the namespace, not on the link
    ip('-n', NS, 'addr', 'add', `${ROUTED}/24`, 'dev', 'lo');
    ip('-n', NS, 'addr', 'add', `${RULED}/24`, 'dev', 'lo');
    ip('route', 'add', `11.${X}.1.0/24`, 'via', NEXT_HOP, 'dev', VETH);
    ip('route', 'add', `11.${X}.2.0/24`, 'via', NEXT_HOP, 'dev', VETH, 'table', TABLE);
    ip('rule', 'add', 'to', `11.${X}.2.0/24`, 'table', TABLE);
    const program = `require('http').createServer((q, r) => r.end('operator page at ' + q.socket.localAddress)).listen(${PORT}, '0.0.0.0', () => console.log('up'))`;
    server = spawn('nsenter', [`--net=/run/netns/${NS}`, process.execPath, '-e', program], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    await new Promise<void>((resolve, reject) => {
      server!.stdout!.once('data', () => resolve());
      server!.once('exit', (code) => reject(new Error(`operator server exited ${code}`)));
    });
  } catch (err) {
    removeAll();
    throw err;
  }
}, 30_000);

afterAll(removeAll);

/** The body of a GET from this host, without the egress. */
const fromHost = (address: string) =>
  new Promise<string>((resolve, reject) => {
    get({ host: address, port: PORT, path: '/', timeout: 5_000 }, (res) => {
      let body = '';
      res.on('data', (d: Buffer) => (body += d.toString()));
      res.on('end', () => resolve(body));
    }).on('error', reject);
  });

async function withInstance(
  server: TestServer,
  run: (sh: (c: string) => Promise<string>) => Promise<void>,
) {
  const res = await server.api('/v1/start', { json: { instance_type: 'ubuntu' } });
  const { id } = (await res.json()) as { id: string };
  expect(res.status).toBe(200);
  const sh = async (command: string) => {
    const r = await server.api(`/v1/instance/${id}/bash`, { json: { command, timeout: 60 } });
    const body = (await r.json()) as { output?: string; error?: string };
    expect(r.status, JSON.stringify(body)).toBe(200);
    return `${body.output ?? ''}${body.error ?? ''}`;
  };
  try {
    await run(sh);
  } finally {
    await server.api(`/v1/instance/${id}/stop`, { method: 'POST' });
  }
}

/** One line per URL: `<name> <status> <first bytes of the body>`. */
const probe = (name: string, url: string, extra = '') =>
  `echo "${name} $(curl -s -m 5 ${PROXY} ${extra} -o /tmp/b -w '%{http_code}' '${url}') $(head -c 60 /tmp/b 2>/dev/null)"; rm -f /tmp/b`;

const probes = [
  probe('routed', `http://${ROUTED}:${PORT}/`),
  probe('routed-mapped', `http://[::ffff:${ROUTED}]:${PORT}/`),
  probe('routed-connect', `http://${ROUTED}:${PORT}/`, '-p'),
  probe('peer', `http://${PEER}:${PORT}/`),
  probe('peer-connect', `http://${PEER}:${PORT}/`, '-p'),
  probe('next-hop', `http://${NEXT_HOP}:${PORT}/`),
  probe('ruled', `http://${RULED}:${PORT}/`),
  probe('ruled-connect', `http://${RULED}:${PORT}/`, '-p'),
].join('; ');

describe('networks the host routes to', () => {
  it('are reached from the host itself', async () => {
    expect(await fromHost(ROUTED)).toBe(`operator page at ${ROUTED}`);
    expect(await fromHost(PEER)).toBe(`operator page at ${PEER}`);
    expect(await fromHost(RULED)).toBe(`operator page at ${RULED}`);
  });

  it('are refused to an instance by default, plain and tunnelled', async () => {
    await using burrow = await testServer();
    await withInstance(burrow, async (sh) => {
      const out = await sh(probes);
      for (const what of ['routed', 'routed-mapped', 'peer', 'next-hop', 'ruled']) {
        expect(out, what).toMatch(new RegExp(`^${what} 403 burrow egress: private_network`, 'm'));
      }
      expect(out).toMatch(/^routed-connect (403|000) $/m);
      expect(out).toMatch(/^peer-connect (403|000) $/m);
      expect(out).toMatch(/^ruled-connect (403|000) $/m);
      expect(out).not.toContain('operator page');
    });
  }, 120_000);

  it('are reached where the operator allowed them, and nothing more', async () => {
    await using burrow = await testServer({
      isolation: { allowNetworks: [`11.${X}.1.0/24`, `${PEER}/32`] },
    });
    await withInstance(burrow, async (sh) => {
      const out = await sh(probes);
      expect(out).toMatch(new RegExp(`^routed 200 operator page at ${ROUTED}$`, 'm'));
      expect(out).toMatch(new RegExp(`^routed-mapped 200 operator page at ${ROUTED}$`, 'm'));
      expect(out).toMatch(new RegExp(`^routed-connect 200 operator page at ${ROUTED}$`, 'm'));
      expect(out).toMatch(new RegExp(`^peer 200 operator page at ${PEER}$`, 'm'));
      expect(out).toMatch(new RegExp(`^peer-connect 200 operator page at ${PEER}$`, 'm'));
      expect(out).toMatch(/^next-hop 403 burrow egress: private_network/m);
      expect(out).toMatch(/^ruled 403 burrow egress: private_network/m);
    });
  }, 120_000);
});
