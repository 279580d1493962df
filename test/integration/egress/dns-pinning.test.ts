/**
 * DNS rebinding between the egress's check and its connection, from the instance's side: a name
 * whose first answer is an address the instance may reach and whose every later answer is one it
 * may not (here the cluster's database, a refused endpoint on 127.0.0.2). The egress must connect
 * to the very addresses it checked, so the "database" never sees a connection, whether the
 * instance tunnels (`CONNECT`), proxies plain HTTP, or navigates (`check`, then the connection).
 *
 * The attacker's name server is the resolver the server process uses: `dns.lookup` (what Node's
 * sockets call when not given a lookup) and `dns/promises.lookup` (what the egress calls) answer
 * `rebind.test` as a rebinding server would; every other name is left to the real resolver.
 */
import dns, { type LookupAddress } from 'node:dns';
import http from 'node:http';
import { syncBuiltinESMExports } from 'node:module';
import net, { type AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { Logger } from '../../../src/server/instances/runtime.js';
import { Egress } from '../../../src/server/sandbox/egress/egress.js';

const quiet: Logger = { info() {}, warn() {}, error() {}, debug() {} };
const NAME = 'rebind.test';
const ALLOWED = '127.0.0.1';
/** The cluster's database, as far as the egress knows: refused whatever the operator allowed. */
const DATABASE = '127.0.0.2';

/** Answers to `rebind.test` so far: the first is the allowed address, every later one the database. */
let asked = 0;
function rebinding(): LookupAddress[] {
  return [{ address: asked++ === 0 ? ALLOWED : DATABASE, family: 4 }];
}

const realLookup = dns.lookup;
const realPromiseLookup = dns.promises.lookup;

/** The local address of every connection the listener accepted: which address was reached. */
const reached: string[] = [];
let listener: http.Server;
let port: number;
let proxy: net.Server;
let proxyPort: number;
let egress: Egress;

beforeAll(async () => {
  const fake = ((host: string, options: unknown, callback?: unknown) => {
    const cb = (typeof options === 'function' ? options : callback) as (
      err: Error | null,
      address: string | LookupAddress[],
      family?: number,
    ) => void;
    const opts = (typeof options === 'object' && options) || {};
    if (host !== NAME) return realLookup(host, opts as dns.LookupOptions, cb as never);
    const answer = rebinding();
    if ((opts as dns.LookupOptions).all) process.nextTick(cb, null, answer);
    else process.nextTick(cb, null, answer[0]!.address, 4);
  }) as typeof dns.lookup;
  dns.lookup = fake;
  dns.promises.lookup = (async (host: string, options?: dns.LookupOptions) => {
    if (host !== NAME) return realPromiseLookup(host, options ?? {});
    const answer = rebinding();
    return options?.all ? answer : answer[0];
  }) as typeof dns.promises.lookup;
  syncBuiltinESMExports(); // `import { lookup } from 'node:dns/promises'` sees the patched one

  // a page on every loopback address, naming the address it was reached on
  listener = http.createServer((req, res) => {
    res.end(`reached ${req.socket.localAddress}`);
  });
  listener.on('connection', (s: net.Socket) => reached.push(s.localAddress ?? '?'));
  await new Promise<void>((r) => listener.listen(0, '0.0.0.0', r));
  port = (listener.address() as AddressInfo).port;

  egress = new Egress(
    {
      blockedDomains: [],
      allowHostLoopback: true,
      allowHostPorts: [],
      protectedPorts: () => [],
      refusedEndpoints: () => [{ address: DATABASE }],
    },
    quiet,
  );
  proxy = net.createServer({ allowHalfOpen: true }, (s) => egress.handle(s));
  await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', r));
  proxyPort = (proxy.address() as AddressInfo).port;
});

afterAll(async () => {
  dns.lookup = realLookup;
  dns.promises.lookup = realPromiseLookup;
  syncBuiltinESMExports();
  egress?.close();
  await new Promise((r) => proxy?.close(r));
  listener?.closeAllConnections();
  await new Promise((r) => listener?.close(r));
});

beforeEach(() => {
  asked = 0;
  reached.length = 0;
});

/** Raw bytes to the proxy, and everything it answers until it closes (or 5 s). */
async function raw(request: string): Promise<string> {
  const s = net.connect(proxyPort, '127.0.0.1');
  s.setTimeout(5_000, () => s.destroy());
  const chunks: Buffer[] = [];
  s.on('data', (c: Buffer) => chunks.push(c));
  s.on('error', () => {});
  s.write(request);
  await new Promise((r) => s.once('close', r));
  return Buffer.concat(chunks).toString();
}

describe('a name that rebinds between the check and the connection', () => {
  it('the resolver really rebinds: the database refuses a name that answers with it first', async () => {
    asked = 1; // the first answer is already spent: this one is the database
    const out = await raw(
      `GET http://${NAME}:${port}/ HTTP/1.1\r\nHost: ${NAME}:${port}\r\nConnection: close\r\n\r\n`,
    );
    expect(out).toMatch(/^HTTP\/1\.1 403/);
    expect(out).toContain('cluster_endpoint');
    expect(reached).toEqual([]);
  });

  it('a tunnel goes to the address that was checked, never to the database', async () => {
    const out = await raw(
      `CONNECT ${NAME}:${port} HTTP/1.1\r\nHost: ${NAME}:${port}\r\n\r\n` +
        `GET / HTTP/1.1\r\nHost: ${NAME}:${port}\r\nConnection: close\r\n\r\n`,
    );
    expect(out).toMatch(/^HTTP\/1\.1 200/);
    expect(out).toContain(`reached ${ALLOWED}`);
    expect(out).not.toContain(DATABASE);
    expect(reached).toEqual([ALLOWED]);
  });

  it('a plain HTTP request goes to the address that was checked, never to the database', async () => {
    const out = await raw(
      `GET http://${NAME}:${port}/ HTTP/1.1\r\nHost: ${NAME}:${port}\r\nConnection: close\r\n\r\n`,
    );
    expect(out).toMatch(/^HTTP\/1\.1 200/);
    expect(out).toContain(`reached ${ALLOWED}`);
    expect(reached).toEqual([ALLOWED]);
  });

  it("a navigation's connection goes to the address its check let through", async () => {
    expect(await egress.check(NAME, port)).toBeUndefined();
    const out = await raw(
      `GET http://${NAME}:${port}/ HTTP/1.1\r\nHost: ${NAME}:${port}\r\nConnection: close\r\n\r\n`,
    );
    expect(out).toContain(`reached ${ALLOWED}`);
    expect(reached.every((a) => a === ALLOWED)).toBe(true);
    expect(reached).not.toContain(DATABASE);
  });
});

describe('the same names through a client that trusts DNS', () => {
  it('an unpinned connection would have reached the database (what the pin prevents)', async () => {
    asked = 1;
    const body = await new Promise<string>((resolve, reject) => {
      http
        .get({ host: NAME, port, agent: false }, (res) => {
          let b = '';
          res.on('data', (c: Buffer) => (b += c.toString()));
          res.on('end', () => resolve(b));
        })
        .on('error', reject);
    });
    expect(body).toBe(`reached ${DATABASE}`);
  });
});
