/**
 * What the two absolute-form fronts (plain requests, upgrades) share: reading the target, the
 * `Host` header and the body framing of a request strictly before anything goes upstream, and the
 * request that relays it to the checked addresses of its target, directly or through the
 * upstream proxy.
 */
import type { LookupAddress } from 'node:dns';
import http from 'node:http';
import type net from 'node:net';
import { pinnedLookup } from '../dial.js';
import {
  forwardHeaders,
  headerValues,
  hostHeader,
  parseAuthority,
  parseProxyTarget,
  requestFraming,
  type Authority,
  type Framing,
  type ProxyTarget,
} from '../proxy-http.js';
import { FORWARDING_HEADERS, forwardedHosts, namedHost } from '../host-lines.js';
import { normalizeHost } from '../policy.js';
import { Refusal } from '../refusal.js';
import type { Front } from './front.js';

/** An absolute-form request as read: its target, its `Host` header's authority, its framing. */
export interface AbsoluteRequest {
  target: ProxyTarget;
  host: Authority | undefined;
  framing: Framing;
  /**
   * The host a URL parser reads in the path (`//other/` resolves to `other`): a server that
   * routes by `new URL(path, base)` serves that host, so it must pass the name rule too.
   */
  pathHost: string | undefined;
  /** The hosts its forwarding headers name (`X-Forwarded-Host`, `Forwarded: host=`, …). */
  forwarded: string[];
}

/** The hosts `req`'s forwarding headers name, as the `Host` rule reads a host. */
function forwardedIn(rawHeaders: string[]): string[] {
  const hosts: string[] = [];
  for (const field of FORWARDING_HEADERS) {
    for (const value of headerValues(rawHeaders, field)) {
      for (const v of forwardedHosts(field, value)) {
        const host = namedHost(`Host: ${v}`);
        if (host !== undefined) hosts.push(host);
      }
    }
  }
  return hosts;
}

/**
 * The host a path names as the tunnel's `Host` rule reads one (host-lines.ts): one that starts an
 * authority (`//host/…`, `/%2f%2fhost`) or holds a URL (`/http://host/`), else undefined.
 */
function hostInPath(path: string): string | undefined {
  const host = namedHost(`GET ${path}`);
  return host ? normalizeHost(host) : undefined;
}

/** Target, `Host` header and body framing of an absolute-form request, or a 400 Refusal. */
export function requestTarget(req: http.IncomingMessage): AbsoluteRequest {
  const target = parseProxyTarget(req.url ?? '');
  if (target === undefined) {
    throw new Refusal(
      400,
      'origin_form',
      'this is a proxy: send absolute-form requests (GET http://host/path) or CONNECT host:port',
    );
  }
  const framing = requestFraming(req.httpVersion, req.rawHeaders);
  if ('refused' in framing) throw new Refusal(400, 'bad_request', framing.refused);
  const values = headerValues(req.rawHeaders, 'host');
  if (values.length > 1) throw new Refusal(400, 'bad_request', 'more than one Host header');
  const pathHost = hostInPath(target.path);
  const forwarded = forwardedIn(req.rawHeaders);
  if (values[0] === undefined) return { target, host: undefined, framing, pathHost, forwarded };
  const host = parseAuthority(values[0], target.port);
  if (host === undefined) throw new Refusal(400, 'bad_request', 'malformed Host header');
  return { target, host, framing, pathHost, forwarded };
}

/**
 * The request to the checked addresses of `target` that relays `req`: origin-form path, the
 * client's headers without hop-by-hop ones, a Host header when the client sent none, and the
 * body framing the client's head was read with (a chunked body stays chunked on every method:
 * Node would send a GET's body unframed, which the upstream would read as a second request).
 * Upgrades get a connection of their own (it becomes the tunnel); plain requests share the agent.
 */
export function relayRequest(
  front: Front,
  req: http.IncomingMessage,
  { target, host, framing }: AbsoluteRequest,
  addresses: readonly LookupAddress[],
  upgrade: boolean,
): http.ClientRequest {
  const headers = forwardHeaders(req.rawHeaders, upgrade ? { upgrade: true } : {});
  if (host === undefined) headers.push('Host', hostHeader(target));
  if (framing.kind === 'chunked') headers.push('Transfer-Encoding', 'chunked');
  // through an upstream proxy, each request gets a tunnel of its own (no keep-alive pool)
  const chained = front.routes.chained(target.host) !== undefined;
  const up = http.request({
    // no agent at all when chained: Node uses `createConnection` only without one
    agent: chained ? undefined : upgrade ? false : front.dialer.agent,
    host: target.host,
    port: target.port,
    method: req.method ?? 'GET',
    path: target.path,
    headers,
    setHost: false,
    lookup: pinnedLookup(addresses), // Node 20 tries each address (autoSelectFamily)
    ...(chained && {
      createConnection: (_opts: unknown, done: (err: Error | null, s: net.Socket) => void) => {
        front.routes.open(target, addresses).then(
          (s) => {
            done(null, s);
            // a tunnel comes paused (nothing of it is lost before its reader is there); the
            // request attaches its reader on the next tick
            setImmediate(() => s.resume());
          },
          (err: Error) => done(err, undefined as unknown as net.Socket),
        );
        return undefined;
      },
    }),
  });
  front.dialer.watchConnect(up, target);
  return up;
}
