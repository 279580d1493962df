/**
 * Clients other than this host, for the caps per client: every loopback address is one client
 * (the host; src/server/sandbox/egress/address.ts `clientKey`), so a test that needs a second
 * client cannot pick 127.0.0.2. These are addresses of an interface made for the test (a veth
 * pair, both ends in this namespace: the kernel has no dummy interfaces everywhere), in
 * 198.18.X.0/24 (the benchmarking range, RFC 2544; X random so that runs side by side do not
 * meet): a socket bound to one reaches a server on 127.0.0.1 from that address, and the server
 * counts it as a client of its own. Root only (tests run as root, as CI does).
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';

const ip = (...args: string[]) => execFileSync('ip', args, { stdio: 'pipe' });

export interface OtherClients {
  /** `count` addresses, each a client of its own. */
  readonly addresses: string[];
  /** Removes the interface and its addresses (idempotent). */
  remove(): void;
}

export function otherClients(count: number): OtherClients {
  const tag = randomBytes(3).toString('hex');
  const link = `boc${tag}`;
  const x = randomBytes(1)[0]!;
  const addresses = Array.from({ length: count }, (_, i) => `198.18.${x}.${i + 1}`);
  ip('link', 'add', link, 'type', 'veth', 'peer', 'name', `${link}p`);
  let removed = false;
  const remove = () => {
    if (removed) return;
    removed = true;
    try {
      ip('link', 'del', link);
    } catch {
      // already gone
    }
  };
  try {
    for (const a of addresses) ip('addr', 'add', `${a}/32`, 'dev', link);
    ip('link', 'set', link, 'up');
    ip('link', 'set', `${link}p`, 'up');
  } catch (err) {
    remove();
    throw err;
  }
  return { addresses, remove };
}
