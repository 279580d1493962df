/**
 * What the egress lends each of its fronts (the three ways a client asks it for a connection:
 * `CONNECT`, absolute-form requests, absolute-form upgrades). A front reads its request, has the
 * target admitted, opens the way out and joins both ends; the decisions (admission, refusal
 * answers and their logs) stay with the `Egress`, which alone holds the policy.
 */
import type { LookupAddress } from 'node:dns';
import type http from 'node:http';
import type net from 'node:net';
import type { Dialer } from '../dial.js';
import type { Authority } from '../proxy-http.js';
import type { Kind } from '../refusal.js';
import type { Routes } from '../route.js';

export interface Front {
  /** Whether the egress has closed: what was admitted meanwhile is dropped, not opened. */
  closed(): boolean;
  /**
   * Check the names, resolve, check every address: the addresses to connect to, or a Refusal.
   * `alsoNamed`: the `Host` header's host and any other a server may take for the target's (a
   * path's `//host`), which must pass the name rule too.
   */
  admit(
    kind: Kind,
    target: Authority,
    alsoNamed?: readonly (string | undefined)[],
  ): Promise<LookupAddress[]>;
  readonly routes: Routes;
  readonly dialer: Dialer;
  /**
   * Join `client` and `upstream` both ways (splice.ts); with `sniff`, the CONNECT target, the
   * tunnel's first flight is checked for a blocked server name first.
   */
  splice(
    client: net.Socket,
    upstream: net.Socket,
    head: Buffer,
    sniff: Authority | undefined,
  ): void;
  /** Answer a refusal on a raw socket (after CONNECT or an upgrade) and close it. */
  refuseRaw(kind: Kind, socket: net.Socket, err: unknown): void;
  /** Answer a refusal as the response to a plain request (or destroy it once headers went). */
  refuseResponse(res: http.ServerResponse, err: unknown): void;
}
