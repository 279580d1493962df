/**
 * An instance's only way out: an HTTP proxy whose listening socket lives in the instance's network
 * namespace (127.0.0.1:3128 there) and whose accepted connections are handed to `handle()` in the
 * server process, which makes every outbound connection on the instance's behalf.
 *
 * It speaks what proxy-aware clients send: `CONNECT host:port` tunnels (HTTPS, wss, anything over
 * TCP), absolute-form HTTP requests (`GET http://host/path`, any number per keep-alive connection,
 * to any number of hosts) and absolute-form upgrades (WebSocket over plain HTTP).
 *
 * Guarantees, for every connection:
 * - a blocked domain (or a subdomain of one) is refused when named by the CONNECT target, the
 *   absolute URI, the `Host` header, or the SNI of a TLS ClientHello sent through a tunnel (domain
 *   fronting): the tunnel is closed before any client byte reaches the server; in a tunnel that
 *   carries no TLS, every `Host` line (and absolute request line) of every request is checked
 *   before it passes (`host-lines.ts`);
 * - names are resolved here, once; the connection goes to the very addresses that were checked
 *   (no second lookup, so DNS rebinding cannot swap them);
 * - every address is read as the kernel connects to it (`address.ts`: numeric shorthands,
 *   IPv4-mapped IPv6, `0.0.0.0`/`::` as this host) before any rule: the host itself (loopback,
 *   unspecified, every interface address) is reachable only on ports the operator allowed,
 *   burrow's own ports and the cluster's database and nodes never, link-local addresses (cloud
 *   metadata) never, private networks (RFC 1918, 100.64/10, fc00::/7) only those the operator
 *   allowed by CIDR; see `policy.ts`;
 * - refusals are an HTTP status with a short text body (403 policy, 400 malformed, 431 head too
 *   large, 502 upstream failure, 504 upstream timeout, 503 too many connections) and a closed
 *   connection; after a CONNECT was answered 200, a refusal is a TLS `access_denied` alert;
 * - no input from the instance can throw out of this module; idle client connections close
 *   after `idleTimeoutMs`, request heads are bounded, connections are capped; `close()` ends
 *   everything, tunnels included;
 * - logs name host:port and the decision, at debug level; never paths or query strings.
 *
 * Not guaranteed:
 * - a client that ignores the proxy settings gets nowhere (the namespace has no other route), and
 *   raw TCP needs a CONNECT-capable client; UDP (QUIC, DNS) has no way out at all;
 * - only the first TLS ClientHello of a tunnel is read: what flows after it (STARTTLS, a proxy
 *   chained behind an allowed host, Encrypted Client Hello's inner name) is not inspected.
 *   `blocked_domains` keeps honest clients away from names; an allowed server willing to relay
 *   can always be used as a relay;
 * - "the host" is what its interfaces say: a public address reached through NAT hairpinning is
 *   not recognised as the host. A public address routed to a private network is not private;
 * - established tunnels have no idle timeout (WebSockets idle for long); TCP keepalive finds dead
 *   peers, `close()` ends the rest.
 *
 * For whoever wires it in: set the proxy variables in lower case too (curl reads `http_proxy`
 * only in lower case), and `no_proxy=localhost,127.0.0.1,::1` keeps the instance's own loopback
 * services out of the proxy (through it, `localhost` means the host's).
 *
 * This class is admission and wiring: what may be reached (names, addresses, ports, the cap of
 * connections) and how refusals are answered and logged. The rest is in files of their own:
 * `dial.ts` (resolving and connecting out, pinned), `route.ts` (the upstream proxy and connections
 * opened ahead by `check`), `splice.ts` (joining both ends, the ClientHello check, hanging up),
 * and the fronts, one per way a client asks (`fronts/connect.ts`, `fronts/request.ts`,
 * `fronts/upgrade.ts`); the rules themselves are `policy.ts`, the wire details `proxy-http.ts`.
 */
import type { LookupAddress } from 'node:dns';
import http from 'node:http';
import net from 'node:net';
import type { Logger } from '../../../internal/log.js';
import { Dialer } from './dial.js';
import type { Front } from './fronts/front.js';
import { serveConnect } from './fronts/connect.js';
import { serveRequest } from './fronts/request.js';
import { serveUpgrade } from './fronts/upgrade.js';
import {
  blockedDomainMatcher,
  checkAddresses,
  hostAddresses,
  type HostAccess,
  type RefusedEndpoint,
} from './policy.js';
import { label, plainResponse, type Authority } from './proxy-http.js';
import {
  asRefusal,
  errorCode,
  Refusal,
  refusalHint,
  type EgressVerdict,
  type Kind,
} from './refusal.js';
import { Routes } from './route.js';
import { hangUp, splice } from './splice.js';
import type { UpstreamProxy } from './upstream.js';

export { refusalHint, type EgressRefusalCode, type EgressVerdict } from './refusal.js';

export interface EgressPolicy {
  /**
   * Bare host names refused with all their subdomains (case-insensitive, trailing dot ignored).
   * Read once, when the `Egress` is made.
   */
  blockedDomains: readonly string[];
  /**
   * Allow every port of the host's loopback (and its other own addresses) except
   * `protectedPorts` (operator flag `--allow-host-loopback`).
   */
  allowHostLoopback: boolean;
  /** Host loopback ports allowed one by one (operator flag `--allow-host-port`, repeatable). */
  allowHostPorts: readonly number[];
  /** Private networks instances may reach, as CIDRs (operator flag `--allow-network`). */
  allowNetworks?: readonly string[];
  /**
   * burrow's own ports (API, anything else it listens on): never reachable on the host, whatever
   * the flags. Called for each connection and each request, so ports opened later count.
   */
  protectedPorts: () => Iterable<number>;
  /**
   * Told of what the instance should show among its events: an upstream proxy's failure, once
   * per kind of failure (`proxy_unreachable`, `proxy_auth_failed`, …).
   */
  onEvent?: (type: string, message: string) => void;
  /** Endpoints of burrow's own cluster (policy.ts `RefusedEndpoint`); called like `protectedPorts`. */
  refusedEndpoints?: () => Iterable<RefusedEndpoint>;
  /**
   * The upstream proxy every connection not on its bypass list is chained to (`proxy` of the
   * start request). Targets are checked as without one before anything is sent to it.
   */
  upstream?: UpstreamProxy | undefined;
}

export interface EgressOptions {
  /** Client connection with no request in flight closed after this long, in ms. Default 60 000. */
  idleTimeoutMs?: number;
  /** Time for a started TLS ClientHello to arrive whole, in ms. Default 5 000. */
  helloTimeoutMs?: number;
  /** Deadline for resolving a name, and again for connecting to it, in ms. Default 15 000. */
  connectTimeoutMs?: number;
  /** Largest request head (request line and headers), in bytes. Default 16 384. */
  maxHeaderBytes?: number;
  /**
   * Client connections open at once; more are answered 503. Also caps the upstream connections of
   * plain HTTP requests (pipelined requests queue). Chromium opens at most 32 to a proxy. Default
   * 256.
   */
  maxConnections?: number;
}

const DEFAULTS: Required<EgressOptions> = {
  idleTimeoutMs: 60_000,
  helloTimeoutMs: 5_000,
  connectTimeoutMs: 15_000,
  maxHeaderBytes: 16 * 1024,
  maxConnections: 256,
};

export class Egress {
  readonly #policy: EgressPolicy;
  readonly #log: Logger;
  readonly #opts: Required<EgressOptions>;
  #blocked: (host: string) => string | undefined;
  /** Whether any domain is blocked: if none is, a tunnel's bytes need no watching (splice.ts). */
  #blocksAny: boolean;
  /** Never listens: Node's HTTP parser, fed with `emit('connection')`. */
  readonly #server: http.Server;
  readonly #dialer: Dialer;
  readonly #routes: Routes;
  /** What the fronts are lent (fronts/front.ts). */
  readonly #front: Front;
  readonly #clients = new Set<net.Socket>();
  /** Connections past the cap, answered 503 and lingering until their peer has read it. */
  readonly #refused = new Set<net.Socket>();
  /** Responses in flight per client connection (a parse error then cannot be answered). */
  readonly #inFlight = new WeakMap<net.Socket, number>();
  #closed = false;
  /** Host-local refusals already logged as warnings. */
  readonly #warned = new Set<string>();

  /**
   * Chain to `upstream` from now on (a warm-pool instance taking its user's `proxy`), or connect
   * directly again with `undefined`. Connections opened earlier keep their way out.
   */
  setUpstream(upstream: UpstreamProxy | undefined): void {
    this.#routes.setUpstream(upstream);
  }

  /**
   * Replace the blocked domains (a warm-pool instance taking its user's `blocked_domains`, before
   * anything of that user runs). Connections opened earlier keep their upstream.
   */
  setBlockedDomains(domains: readonly string[]): void {
    this.#blocked = blockedDomainMatcher(domains);
    this.#blocksAny = domains.length > 0;
  }

  constructor(policy: EgressPolicy, log: Logger, options: EgressOptions = {}) {
    this.#policy = policy;
    this.#log = log;
    this.#opts = { ...DEFAULTS, ...options };
    this.#blocked = blockedDomainMatcher(policy.blockedDomains);
    this.#blocksAny = policy.blockedDomains.length > 0;
    this.#dialer = new Dialer(this.#opts, log);
    this.#routes = new Routes({
      upstream: policy.upstream,
      dialer: this.#dialer,
      admitHop: (hop) => this.#addresses(hop),
      connectTimeoutMs: this.#opts.connectTimeoutMs,
      log,
      onEvent: policy.onEvent,
    });
    this.#front = {
      closed: () => this.#closed,
      admit: (kind, target, alsoNamed) => this.#admit(kind, target, alsoNamed),
      routes: this.#routes,
      dialer: this.#dialer,
      splice: (client, upstream, head, sniff) =>
        splice(
          client,
          upstream,
          head,
          // a TLS hello's name and a plain tunnel's lines are read only to refuse blocked
          // domains: with none, the tunnel is spliced unread
          sniff && this.#blocksAny
            ? {
                target: sniff,
                blocked: (name) => this.#blocked(name),
                helloTimeoutMs: this.#opts.helloTimeoutMs,
                log,
              }
            : undefined,
        ),
      refuseRaw: (kind, socket, err) => this.#refuseRaw(kind, socket, err),
      refuseResponse: (res, err) => this.#refuseResponse(res, err),
    };
    this.#server = http.createServer({
      maxHeaderSize: this.#opts.maxHeaderBytes,
      requireHostHeader: false,
      noDelay: true,
    });
    // Idle before the first request and between requests; Node's parser applies both.
    this.#server.timeout = this.#opts.idleTimeoutMs;
    this.#server.keepAliveTimeout = this.#opts.idleTimeoutMs;
    this.#server.on('request', (req, res) => this.#onRequest(req, res));
    this.#server.on('connect', (req, socket, head) =>
      serveConnect(this.#front, req, socket as net.Socket, head),
    );
    this.#server.on('upgrade', (req, socket, head) =>
      serveUpgrade(this.#front, req, socket as net.Socket, head),
    );
    this.#server.on('clientError', (err, socket) => this.#onClientError(err, socket as net.Socket));
  }

  /** Serve one accepted client connection (a net.Socket from the instance's listener). */
  handle(socket: net.Socket): void {
    socket.on('error', (err) => this.#log.debug({ egress: 'client', err: errorCode(err) }));
    if (this.#closed) {
      socket.destroy();
      return;
    }
    if (this.#clients.size >= this.#opts.maxConnections) {
      this.#log.warn({ egress: 'client', decision: 'refused', code: 'busy' });
      // the answers to refused connections take descriptors too: as many as the cap at most
      if (this.#refused.size >= this.#opts.maxConnections) return void socket.destroy();
      this.#refused.add(socket);
      socket.once('close', () => this.#refused.delete(socket));
      hangUp(socket, plainResponse(503, 'busy', 'too many connections'));
      return;
    }
    this.#clients.add(socket);
    socket.once('close', () => this.#clients.delete(socket));
    socket.setKeepAlive(true, 30_000);
    this.#server.emit('connection', socket);
  }

  [Symbol.dispose](): void {
    this.close();
  }

  /** Destroy every open connection and tunnel (instance stopped). Idempotent. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    for (const s of [...this.#clients, ...this.#refused]) s.destroy();
    this.#dialer.close();
    this.#routes.close();
  }

  /**
   * What the egress would answer a connection to `host:port`, decided before any connection is
   * made (names checked, resolved, addresses classified): `undefined` when it would be let
   * through, else why not. The browser's DevTools side uses it to fail a navigation the way
   * Chromium's own network stack fails for the same cause (see `navigationFailure`). A refusal
   * is logged like the proxy's own, naming the operator's switch.
   */
  async check(host: string, port: number): Promise<EgressVerdict | undefined> {
    if (this.#closed) return undefined;
    try {
      const target = { host, port };
      const addresses = await this.#admit('navigate', target);
      // the navigation's own connection follows at once: it uses these, not a second lookup
      if (net.isIP(host) === 0) this.#dialer.remember(host, addresses);
      // the navigation's connection is made now, and kept for it: a target that refuses it (or
      // never answers) fails the navigation the way it fails in Chromium, not with a 502 page
      await this.#routes.preconnect(target, addresses);
      return undefined;
    } catch (err) {
      const r = asRefusal(err, this.#log);
      this.#logRefusal('navigate', r);
      return { code: r.code, message: r.message };
    }
  }

  // ---- admission ----

  /** The host-access rules as they are now (ports opened and nodes joined later count). */
  #access(): HostAccess {
    return {
      ...this.#policy,
      protectedPorts: this.#policy.protectedPorts(),
      refusedEndpoints: this.#policy.refusedEndpoints?.() ?? [],
    };
  }

  /**
   * Check the names, resolve, check every address: the addresses to connect to, or a Refusal.
   * `alsoNamed`: other hosts a server may take for the target's (the `Host` header's, a path's
   * `//host`), which must pass the name rule too.
   */
  async #admit(
    kind: Kind,
    target: Authority,
    alsoNamed: readonly (string | undefined)[] = [],
  ): Promise<LookupAddress[]> {
    let addresses: LookupAddress[];
    try {
      for (const name of [target.host, ...alsoNamed]) {
        if (name === undefined) continue;
        const hit = this.#blocked(name);
        if (hit !== undefined) {
          throw new Refusal(
            403,
            'blocked_domain',
            `${name} is blocked (${hit}); ${refusalHint('blocked_domain', target.port)}`,
          );
        }
      }
      addresses = await this.#addresses(target);
    } catch (err) {
      const r = asRefusal(err, this.#log);
      // a name this host cannot resolve may still be one the upstream can: it resolves it there
      if (r.code === 'dns_failed' && this.#routes.chained(target.host)) {
        this.#log.debug({ egress: kind, target: label(target), decision: 'to upstream' });
        return [];
      }
      throw r;
    }
    this.#log.debug({ egress: kind, target: label(target), decision: 'allowed' });
    return addresses;
  }

  /**
   * `target`'s addresses (resolved unless it is one), each checked, or a Refusal. The upstream
   * proxy's own address is admitted by this alone, like a target's but without the blocked
   * domains (route.ts).
   */
  async #addresses(target: Authority): Promise<LookupAddress[]> {
    const family = net.isIP(target.host);
    const addresses = family
      ? [{ address: target.host, family }]
      : await this.#dialer.resolve(target.host);
    const refused = checkAddresses(
      this.#access(),
      addresses.map((a) => a.address),
      target.port,
      hostAddresses(),
    );
    if (refused) {
      const hint = refusalHint(refused.code, target.port);
      throw new Refusal(403, refused.code, hint ? `${refused.message}; ${hint}` : refused.message);
    }
    return addresses;
  }

  // ---- refusals ----

  /** Log a refusal: its code and message, which name host and port but never a path. */
  #logRefusal(kind: Kind, r: Refusal): void {
    const entry = { egress: kind, decision: 'refused', code: r.code, reason: r.message };
    // what only the operator can change is a warning naming the switch (in `reason`), once per
    // refused reason (address and port) of this instance; repeats go to debug
    if (r.code === 'host_local' && !this.#warned.has(r.message) && this.#warned.size < 64) {
      this.#warned.add(r.message);
      this.#log.warn(entry, 'egress: an instance asked for a host port the operator did not open');
    } else this.#log.debug(entry);
  }

  #refuseRaw(kind: Kind, socket: net.Socket, err: unknown): void {
    const r = asRefusal(err, this.#log);
    this.#logRefusal(kind, r);
    try {
      hangUp(socket, plainResponse(r.status, r.code, r.message));
    } catch {
      socket.destroy();
    }
  }

  #refuseResponse(res: http.ServerResponse, err: unknown): void {
    const r = asRefusal(err, this.#log);
    this.#logRefusal('http', r);
    if (res.headersSent) {
      res.destroy();
      return;
    }
    const body = `burrow egress: ${r.code}: ${r.message}\n`;
    try {
      res.writeHead(r.status, {
        'Content-Type': 'text/plain; charset=utf-8',
        'Content-Length': Buffer.byteLength(body),
        Connection: 'close',
        'X-Burrow-Egress': r.code,
      });
      res.end(body);
    } catch {
      res.destroy();
    }
  }

  // ---- the HTTP parser's events ----

  #onRequest(req: http.IncomingMessage, res: http.ServerResponse): void {
    const socket = req.socket as net.Socket;
    this.#inFlight.set(socket, (this.#inFlight.get(socket) ?? 0) + 1);
    res.once('close', () => this.#inFlight.set(socket, (this.#inFlight.get(socket) ?? 1) - 1));
    serveRequest(this.#front, req, res);
  }

  #onClientError(err: Error, socket: net.Socket): void {
    const code = errorCode(err);
    this.#log.debug({ egress: 'client', decision: 'refused', err: code });
    if (code === 'ECONNRESET' || !socket.writable || (this.#inFlight.get(socket) ?? 0) > 0) {
      socket.destroy();
      return;
    }
    const answer =
      code === 'HPE_HEADER_OVERFLOW'
        ? plainResponse(431, 'header_too_large', 'request head too large')
        : plainResponse(400, 'bad_request', 'malformed request');
    hangUp(socket, answer);
  }
}
