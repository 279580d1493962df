/**
 * The address model from the attacker's position (issue 35, item 1): `curl` inside an ubuntu
 * instance, through its egress, against
 * - burrow's own port and a host loopback listener at `0.0.0.0:PORT` and `0:PORT`, where the
 *   operator allowed host loopback (burrow's port refused, the listener reached: the spelling is
 *   the host, and only the port decides);
 * - a server in another network namespace on a private address (10.77.X.2, as the operator's LAN
 *   or a cluster's service would be): refused by default in every spelling, reached once the
 *   operator allowed its network (`allowNetworks`); this failed before the fix;
 * - plain HTTP with a blocked `Host` inside a `CONNECT` tunnel to an allowed address (`curl -p`):
 *   refused like the same request sent to the proxy; this failed before the fix.
 * The cluster's database and nodes in those spellings: cluster-attack.test.ts.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testServer, type TestServer } from '../../helpers/server.js';

const PROXY = "--noproxy '' -x http://127.0.0.1:3128";
const tag = randomBytes(3).toString('hex');
const NS = `burrow-addr-${tag}`;
const VETH = `bav${tag}`;
/** 10.77.X.0/24, X random so that runs side by side do not meet. */
const X = 1 + (randomBytes(1)[0]! % 250);
const PRIVATE = `10.77.${X}.2`;
const PRIVATE_PORT = 8080;

let site: Server;
let sitePort: number;
let privateServer: ChildProcess | undefined;

const ip = (...args: string[]) => execFileSync('ip', args, { stdio: 'ignore' });

beforeAll(async () => {
  site = createServer((_q, r) => r.end('loopback page'));
  await new Promise<void>((r) => site.listen(0, '127.0.0.1', r));
  sitePort = (site.address() as AddressInfo).port;
  // a machine of the private network: a namespace of its own behind a veth pair
  ip('netns', 'add', NS);
  ip('link', 'add', VETH, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', NS);
  ip('addr', 'add', `10.77.${X}.1/24`, 'dev', VETH);
  ip('link', 'set', VETH, 'up');
  ip('-n', NS, 'addr', 'add', `${PRIVATE}/24`, 'dev', 'eth0');
  ip('-n', NS, 'link', 'set', 'eth0', 'up');
  ip('-n', NS, 'link', 'set', 'lo', 'up');
  const program = `require('http').createServer((q, r) => r.end('private page')).listen(${PRIVATE_PORT}, '${PRIVATE}', () => console.log('up'))`;
  privateServer = spawn('nsenter', [`--net=/run/netns/${NS}`, process.execPath, '-e', program], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  await new Promise<void>((resolve, reject) => {
    privateServer!.stdout!.once('data', () => resolve());
    privateServer!.once('exit', (code) => reject(new Error(`private server exited ${code}`)));
  });
}, 30_000);

afterAll(() => {
  site?.close();
  privateServer?.kill('SIGKILL');
  try {
    ip('link', 'del', VETH);
  } catch {
    // gone with the namespace
  }
  try {
    ip('netns', 'del', NS);
  } catch {
    // never made
  }
});

async function withInstance(
  server: TestServer,
  start: Record<string, unknown>,
  run: (sh: (c: string) => Promise<string>) => Promise<void>,
) {
  const res = await server.api('/v1/start', { json: { instance_type: 'ubuntu', ...start } });
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

describe('with host loopback allowed and no network allowed', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await testServer({ isolation: { allowHostLoopback: true } });
  });
  afterAll(async () => {
    await server?.close();
  });

  it("refuses burrow's own port at 0.0.0.0 and 0, reaches the listener there", async () => {
    const apiPort = new URL(server.url).port;
    await withInstance(server, {}, async (sh) => {
      const out = await sh(
        [
          probe('api-0000', `http://0.0.0.0:${apiPort}/v1/instances`),
          probe('api-0', `http://0:${apiPort}/v1/instances`),
          probe('api-v6', `http://[::]:${apiPort}/v1/instances`),
          probe('api-0-connect', `http://0:${apiPort}/v1/instances`, '-p'),
          probe('site-0000', `http://0.0.0.0:${sitePort}/`),
          probe('site-0', `http://0:${sitePort}/`),
        ].join('; '),
      );
      for (const what of ['api-0000', 'api-0', 'api-v6']) {
        expect(out, what).toMatch(new RegExp(`^${what} 403 burrow egress: protected_port`, 'm'));
      }
      expect(out).toMatch(/^api-0-connect (403|000) $/m);
      expect(out).toMatch(/^site-0000 200 loopback page$/m);
      expect(out).toMatch(/^site-0 200 loopback page$/m);
    });
  }, 120_000);

  it('refuses a private network in every spelling, plain and tunnelled', async () => {
    const asNumber = PRIVATE.split('.').reduce((n, b) => n * 256 + Number(b), 0);
    const short = `10.${(77 << 16) + (X << 8) + 2}`;
    await withInstance(server, {}, async (sh) => {
      const out = await sh(
        [
          probe('dotted', `http://${PRIVATE}:${PRIVATE_PORT}/`),
          probe('number', `http://${asNumber}:${PRIVATE_PORT}/`),
          probe('short', `http://${short}:${PRIVATE_PORT}/`),
          probe('mapped', `http://[::ffff:${PRIVATE}]:${PRIVATE_PORT}/`),
          probe('connect', `http://${PRIVATE}:${PRIVATE_PORT}/`, '-p'),
        ].join('; '),
      );
      for (const what of ['dotted', 'number', 'short', 'mapped']) {
        expect(out, what).toMatch(new RegExp(`^${what} 403 burrow egress: private_network`, 'm'));
      }
      expect(out).toMatch(/^connect (403|000) $/m);
      expect(out).not.toContain('private page');
    });
  }, 120_000);

  it('holds plain HTTP inside a CONNECT tunnel to the Host rule', async () => {
    await withInstance(server, { blocked_domains: ['blocked.test'] }, async (sh) => {
      const url = `http://127.0.0.1:${sitePort}/`;
      const out = await sh(
        [
          probe('tunnel-ok', url, '-p'),
          probe('tunnel-blocked', url, "-p -H 'Host: www.blocked.test'"),
          probe('proxied-blocked', url, "-H 'Host: www.blocked.test'"),
        ].join('; '),
      );
      expect(out).toMatch(/^tunnel-ok 200 loopback page$/m);
      expect(out).toMatch(/^tunnel-blocked 403 burrow egress: blocked_domain/m);
      expect(out).toMatch(/^proxied-blocked 403 burrow egress: blocked_domain/m);
    });
  }, 120_000);
});

describe('with the private network allowed', () => {
  it('reaches it, and nothing more', async () => {
    await using server = await testServer({
      isolation: { allowNetworks: [`10.77.${X}.0/24`] },
    });
    await withInstance(server, {}, async (sh) => {
      const out = await sh(
        [
          probe('dotted', `http://${PRIVATE}:${PRIVATE_PORT}/`),
          probe('connect', `http://${PRIVATE}:${PRIVATE_PORT}/`, '-p'),
          probe('other', `http://10.78.0.1:${PRIVATE_PORT}/`),
          probe('loopback', `http://0.0.0.0:${sitePort}/`),
        ].join('; '),
      );
      expect(out).toMatch(/^dotted 200 private page$/m);
      expect(out).toMatch(/^connect 200 private page$/m);
      expect(out).toMatch(/^other 403 burrow egress: private_network/m);
      expect(out).toMatch(/^loopback 403 burrow egress: host_local/m);
    });
  }, 120_000);
});
