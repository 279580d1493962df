/**
 * The real client of a forwarded request. A node that forwards a request to the owner of an
 * instance (../http/cluster/forward.ts) is not the client: the owner's per-client connection cap
 * (../http/limits.ts) must count the address the forwarding node saw. The forwarding node says it in
 * `x-burrow-client`, signed, because anyone can send a header: an address is believed only with
 * a valid signature under a key every node derives from the cluster's secret, never because of
 * where the connection comes from (nodes and clients can share an address, loopback in tests).
 *
 *     x-burrow-client: <address> <unix ms> <hex of HMAC-SHA256(key, address|METHOD|path|unix ms)>
 *
 * The signature covers the method and the path the owner receives, so a header seen on the
 * wire cannot be moved to another request, and the time, so it cannot be replayed later than
 * `MAX_AGE_MS`. The time is the database's as each node reckons it from its lease renewals
 * (nodes.ts, `dbNow`), not the machine's: nodes' own clocks may be apart by any amount. A missing,
 * malformed, stale or badly signed header is ignored: the socket's address counts.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { isIP } from 'node:net';

export const CLIENT_HEADER = 'x-burrow-client';

/** How old (or how far in the future) a signed client address may be. */
export const MAX_AGE_MS = 30_000;

const SIGNATURE = /^[0-9a-f]{64}$/;
const TIME = /^\d{1,15}$/;

export class ClientSigner {
  readonly #key: Buffer;
  readonly #clock: () => number;

  /**
   * `secret`: the cluster's secret; the signing key is derived from it for this use only.
   * `clock`: the cluster's time in Unix milliseconds (the database's, as this node reckons it).
   */
  constructor(secret: Buffer, clock: () => number = Date.now) {
    this.#key = createHmac('sha256', secret).update('burrow forwarded client address v1').digest();
    this.#clock = clock;
  }

  /** The header value saying `address` sent `method path` (as the owner will receive it). */
  sign(address: string, method: string, path: string, now = this.#clock()): string {
    return `${address} ${now} ${this.#mac(address, method, path, String(now))}`;
  }

  /**
   * The client address `value` vouches for, if it is this cluster's signature over `method`
   * and `path`, made within `MAX_AGE_MS` of `now`; else undefined.
   */
  verify(
    value: string | string[] | undefined,
    method: string,
    path: string,
    now = this.#clock(),
  ): string | undefined {
    if (typeof value !== 'string') return undefined;
    const parts = value.split(' ');
    if (parts.length !== 3) return undefined;
    const [address, time, signature] = parts as [string, string, string];
    if (!isIP(address) || !TIME.test(time) || !SIGNATURE.test(signature)) return undefined;
    if (Math.abs(now - Number(time)) > MAX_AGE_MS) return undefined;
    const expected = Buffer.from(this.#mac(address, method, path, time), 'hex');
    return timingSafeEqual(expected, Buffer.from(signature, 'hex')) ? address : undefined;
  }

  /** `verify` of a request as it arrived. */
  clientOf(req: IncomingMessage): string | undefined {
    return this.verify(req.headers[CLIENT_HEADER], req.method ?? '', req.url ?? '');
  }

  #mac(address: string, method: string, path: string, time: string): string {
    return createHmac('sha256', this.#key)
      .update(`${address}|${method.toUpperCase()}|${path}|${time}`)
      .digest('hex');
  }
}
