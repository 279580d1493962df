/**
 * The egress and the host's own non-loopback addresses: a service the host serves on its LAN
 * address (or any interface address) is the host, like its loopback: an instance reaches it only
 * where the operator allowed the host (`--allow-host-loopback`), never on a port opened with
 * `--allow-host-port` (a loopback port), burrow's own never, and without the egress not at all.
 * Where the machine has no such address, a dummy interface (or, in a kernel without dummy
 * interfaces, the loopback interface) gets one for the test.
 */
import { execFileSync } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { networkInterfaces } from 'node:os';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testServer, type TestServer } from '../../helpers/server.js';

/** curl through the egress even for host addresses. */
const PROXY = "--noproxy '' -x http://127.0.0.1:3128";
const DUMMY = 'burrowtest';
const DUMMY_ADDRESS = '198.51.100.77';

let hostV4: string;
let hostV6: string | undefined;
/** What to undo after: the dummy interface, or the address added to `lo`. */
let undo: string[] | undefined;
let open: Server;
let closed: Server;
let openPort: number;
let closedPort: number;

/** The host's first non-internal, non-link-local address of `family`. */
function hostAddress(family: 'IPv4' | 'IPv6'): string | undefined {
  for (const list of Object.values(networkInterfaces())) {
    for (const info of list ?? []) {
      if (info.internal || info.family !== family) continue;
      if (/^(169\.254\.|fe[89ab])/i.test(info.address)) continue;
      return info.address;
    }
  }
  return undefined;
}

/** A page on every host address (dual-stack), naming which server answered. */
async function listen(name: string): Promise<[Server, number]> {
  const s = createServer((_req, res) => res.end(`host page ${name}`));
  await new Promise<void>((r) => s.listen(0, '::', r));
  return [s, (s.address() as AddressInfo).port];
}

function ip(...args: string[]) {
  execFileSync('ip', args, { stdio: 'ignore' });
}

beforeAll(async () => {
  let v4 = hostAddress('IPv4');
  if (!v4) {
    try {
      ip('link', 'add', DUMMY, 'type', 'dummy');
      undo = ['link', 'del', DUMMY];
      ip('link', 'set', DUMMY, 'up');
      ip('addr', 'add', `${DUMMY_ADDRESS}/32`, 'dev', DUMMY);
    } catch {
      if (undo) ip(...undo);
      ip('addr', 'add', `${DUMMY_ADDRESS}/32`, 'dev', 'lo');
      undo = ['addr', 'del', `${DUMMY_ADDRESS}/32`, 'dev', 'lo'];
    }
    v4 = DUMMY_ADDRESS;
  }
  hostV4 = v4;
  hostV6 = hostAddress('IPv6');
  [open, openPort] = await listen('open');
  [closed, closedPort] = await listen('closed');
});

afterAll(() => {
  open?.close();
  closed?.close();
  if (undo) ip(...undo);
});

async function withInstance(
  server: TestServer,
  run: (sh: (c: string) => Promise<string>) => Promise<void>,
) {
  const res = await server.api('/v1/start', { json: { instance_type: 'ubuntu' } });
  const { id } = (await res.json()) as { id: string };
  expect(res.status).toBe(200);
  const sh = async (command: string) => {
    const r = await server.api(`/v1/instance/${id}/bash`, { json: { command, timeout: 30 } });
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

const code = (url: string, extra = '') =>
  `curl -s -o /dev/null -w "%{http_code}" -m 5 ${PROXY} ${extra} ${url}`;

describe("the host's own non-loopback address", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await testServer({
      host: '0.0.0.0',
      isolation: { allowHostLoopback: false, allowHostPorts: [openPort] },
    });
  });
  afterAll(async () => {
    await server?.close();
  });

  it('is the host: an allowed port is reached on loopback only, and nothing without the egress', async () => {
    const apiPort = new URL(server.url).port;
    // the same address as a 32-bit number, and IPv4-mapped IPv6
    const asNumber = hostV4.split('.').reduce((n, b) => n * 256 + Number(b), 0);
    await withInstance(server, async (sh) => {
      const out = await sh(
        [
          `curl -sS -m 3 --noproxy '*' http://${hostV4}:${closedPort}/; echo " direct=$?"`,
          `curl -s -m 5 ${PROXY} http://127.0.0.1:${openPort}/; echo " allowed"`,
          `echo "$(${code(`http://${hostV4}:${openPort}/`)}) opened-on-loopback"`,
          `echo "$(${code(`http://${hostV4}:${closedPort}/`)}) closed"`,
          `echo "$(${code(`http://${hostV4}:${apiPort}/v1/instances`)}) api"`,
          `echo "$(${code(`http://${asNumber}:${closedPort}/`)}) number"`,
          `echo "$(${code(`http://[::ffff:${hostV4}]:${closedPort}/`)}) mapped"`,
          `echo "$(${code(`http://${hostV4}:${closedPort}/`, '-p')}) connect"`,
          hostV6 ? `echo "$(${code(`http://[${hostV6}]:${closedPort}/`)}) v6"` : 'echo "403 v6"',
        ].join('; '),
      );
      // no route out: connecting fails at once
      expect(out).toMatch(/ direct=7/);
      // the allowed port is reached on loopback (the next test reaches the address itself with
      // --allow-host-loopback, so a refusal below is the policy, not the network)
      expect(out).toMatch(/host page open allowed/);
      for (const what of ['opened-on-loopback', 'closed', 'api', 'number', 'mapped', 'v6']) {
        expect(out, what).toMatch(new RegExp(`^403 ${what}$`, 'm'));
      }
      expect(out).toMatch(/^(403|000) connect$/m); // curl prints 000 when the CONNECT is refused
      expect(out).not.toContain('host page closed');
    });
  });
});

describe("burrow's own port on a non-loopback address", () => {
  it('is refused even where the operator allowed the host loopback', async () => {
    await using server = await testServer({
      host: '0.0.0.0',
      isolation: { allowHostLoopback: true },
    });
    const apiPort = new URL(server.url).port;
    await withInstance(server, async (sh) => {
      const out = await sh(
        [
          `echo "$(${code(`http://${hostV4}:${apiPort}/v1/instances`)}) api"`,
          `echo "$(${code(`http://${hostV4}:${apiPort}/v1/instances`, '-p')}) api-connect"`,
          `curl -s -m 5 ${PROXY} http://${hostV4}:${openPort}/; echo " loopback-allowed"`,
        ].join('; '),
      );
      expect(out).toMatch(/^403 api$/m);
      expect(out).toMatch(/^(403|000) api-connect$/m);
      expect(out).toMatch(/host page open loopback-allowed/);
    });
  });
});
