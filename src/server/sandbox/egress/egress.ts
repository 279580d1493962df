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
 *   fronting): the tunnel is closed before any client byte reaches the server;
 * - names are resolved here, once; the connection goes to the very addresses that were checked
 *   (no second lookup, so DNS rebinding cannot swap them);
 * - the host itself (loopback, unspecified, every interface address, IPv4-mapped spellings) is
 *   reachable only on ports the operator allowed, burrow's own ports never, link-local addresses
 *   (cloud metadata) never; see `policy.ts`;
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
 *   chained behind an allowed host, a plain-HTTP request with another `Host` inside a CONNECT,
 *   Encrypted Client Hello's inner name) is not inspected. `blocked_domains` keeps honest clients
 *   away from names; an allowed server willing to relay can always be used as a relay;
 * - "the host" is what its interfaces say: a public address reached through NAT hairpinning is
 *   not recognised as the host. Other machines of the LAN are not the host and are reachable;
 * - established tunnels have no idle timeout (WebSockets idle for long); TCP keepalive finds dead
 *   peers, `close()` ends the rest.
 *
 * For whoever wires it in: set the proxy variables in lower case too (curl reads `http_proxy`
 * only in lower case), and `no_proxy=localhost,127.0.0.1,::1` keeps the instance's own loopback
 * services out of the proxy (through it, `localhost` means the host's).
 */
import type { LookupAddress } from 'node:dns';
import { lookup } from 'node:dns/promises';
import http from 'node:http';
import net from 'node:net';
import tls from 'node:tls';
import { background } from '../../../internal/background.js';
import { withDeadline } from '../../../internal/deadline.js';
import type { Logger } from '../../../internal/log.js';
import {
  blockedDomainMatcher,
  checkAddresses,
  hostAddresses,
  type AddressRefusalCode,
  type HostAccess,
  type RefusedEndpoint,
} from './policy.js';
import {
  forwardHeaders,
  headerValues,
  parseAuthority,
  parseProxyTarget,
  plainResponse,
  requestFraming,
  responseHead,
  type Authority,
  type Framing,
  type ProxyTarget,
} from './proxy-http.js';
import { MAX_CLIENT_HELLO_BYTES, sniffClientHello } from './sni.js';
import {
  bypasses,
  openTunnel,
  UpstreamFailure,
  upstreamLabel,
  type UpstreamProxy,
} from './upstream.js';

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

/** How long a name `check` resolved is reused by the connection that follows it, in ms. */
const CHECKED_TTL_MS = 5_000;
/** Names remembered so at most. */
const MAX_CHECKED = 64;
/** How long a tunnel `check` opened through the upstream waits for its connection, in ms. */
const PARKED_TTL_MS = 5_000;

/** Bytes of a tunnel's first flight held back while its ClientHello is read. */
const MAX_SNIFF_BYTES = 2 * MAX_CLIENT_HELLO_BYTES;
/** How long a refused client gets to read the answer before its socket is destroyed, in ms. */
const LINGER_MS = 2_000;
/** TLS alert record: fatal (2), access_denied (49). */
const TLS_ACCESS_DENIED = Uint8Array.from([0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x31]);

export type EgressRefusalCode =
  | 'bad_request'
  | 'origin_form'
  | 'header_too_large'
  | 'blocked_domain'
  | AddressRefusalCode
  | 'blocked_sni'
  | 'tls_invalid'
  | 'dns_failed'
  | 'connect_failed'
  | 'upstream_failed'
  | 'timeout'
  | 'busy'
  | 'internal'
  | 'proxy_refused'
  | UpstreamFailure['code'];

/** A parked connection's key: its target, and whether it is a tunnel through the upstream. */
const parkedKey = (target: Authority, via: UpstreamProxy | undefined) =>
  `${via ? 'upstream' : 'direct'} ${label(target)}`;

/** Why a connection is not served; `status` is what the client is answered. */
class Refusal extends Error {
  constructor(
    readonly status: number,
    readonly code: EgressRefusalCode,
    message: string,
  ) {
    super(message);
  }
}

type Kind = 'connect' | 'http' | 'upgrade' | 'navigate';

/** The egress's decision on a target, from `Egress.check`. */
export interface EgressVerdict {
  code: EgressRefusalCode;
  message: string;
}

/**
 * The operator's switch behind a refusal, for logs and refusal bodies: a host-local port needs
 * `--allow-host-port`, a blocked domain was asked for by the instance's `blocked_domains`.
 */
export function refusalHint(code: EgressRefusalCode, port: number): string | undefined {
  switch (code) {
    case 'host_local':
      return `burrow serve --allow-host-port ${port} (or --allow-host-loopback) lets instances reach it`;
    case 'blocked_domain':
    case 'blocked_sni':
      return "the instance's blocked_domains refuse it";
    case 'protected_port':
      return "burrow's own ports are never reachable from an instance";
    default:
      return undefined;
  }
}

const bracketed = (host: string) => (host.includes(':') ? `[${host}]` : host);
/** `host:port` for logs and messages. */
const label = (t: Authority) => `${bracketed(t.host)}:${t.port}`;
/** The `Host` header a client should have sent for `t`. */
const hostHeader = (t: Authority) => (t.port === 80 ? bracketed(t.host) : label(t));

/** A `lookup` that answers with addresses already resolved and checked, never asking DNS again. */
function pinnedLookup(addresses: readonly LookupAddress[]): net.LookupFunction {
  return (_hostname, options, callback) => {
    if (options.all) callback(null, [...addresses]);
    else callback(null, addresses[0]!.address, addresses[0]!.family);
  };
}

/**
 * Close `socket` gently: send `answer` (if any) and FIN, keep reading and dropping what the peer
 * still sends (closing with unread bytes would reset the connection and could discard the answer
 * before the peer reads it); it closes once the peer's FIN arrives, or is destroyed
 * `LINGER_MS` after, whatever the peer sends meanwhile.
 */
function hangUp(socket: net.Socket, answer?: string | Uint8Array): void {
  if (socket.destroyed) return;
  if (socket.writableEnded && answer !== undefined) {
    socket.destroy();
    return;
  }
  socket.on('data', () => {});
  socket.resume();
  // a deadline, not an idle timer: a peer that keeps sending must not keep the socket open
  const deadline = setTimeout(() => socket.destroy(), LINGER_MS);
  deadline.unref();
  socket.once('close', () => clearTimeout(deadline));
  // autoDestroy closes it once both sides have ended.
  if (socket.writableEnded) return;
  if (answer === undefined) socket.end();
  else socket.end(answer);
}

function errorCode(err: unknown): string {
  const e = err as NodeJS.ErrnoException | undefined;
  return e?.code ?? e?.message ?? String(err);
}

export class Egress {
  readonly #policy: EgressPolicy;
  readonly #log: Logger;
  readonly #opts: Required<EgressOptions>;
  #blocked: (host: string) => string | undefined;
  /** Never listens: Node's HTTP parser, fed with `emit('connection')`. */
  readonly #server: http.Server;
  /** Keeps upstream connections of plain HTTP requests alive between requests. */
  readonly #agent: http.Agent;
  readonly #clients = new Set<net.Socket>();
  /** Connections past the cap, answered 503 and lingering until their peer has read it. */
  readonly #refused = new Set<net.Socket>();
  readonly #upstreams = new Set<net.Socket>();
  /** Responses in flight per client connection (a parse error then cannot be answered). */
  readonly #inFlight = new WeakMap<net.Socket, number>();
  #closed = false;
  /** Host-local refusals already logged as warnings. */
  readonly #warned = new Set<string>();
  /** Names `check` resolved a moment ago, oldest first: the next connection to each reuses them. */
  readonly #checked = new Map<string, { at: number; addresses: LookupAddress[] }>();
  #proxy: UpstreamProxy | undefined;
  /** Tunnels through the upstream that `check` opened, for the navigation's own connection. */
  readonly #parked = new Map<string, net.Socket>();
  /** Upstream failure codes already logged as warnings. */
  readonly #upstreamWarned = new Set<string>();

  /**
   * Chain to `upstream` from now on (a warm-pool instance taking its user's `proxy`), or connect
   * directly again with `undefined`. Connections opened earlier keep their way out.
   */
  setUpstream(upstream: UpstreamProxy | undefined): void {
    this.#proxy = upstream;
    for (const s of this.#parked.values()) s.destroy();
    this.#parked.clear();
  }

  /**
   * Replace the blocked domains (a warm-pool instance taking its user's `blocked_domains`, before
   * anything of that user runs). Connections opened earlier keep their upstream.
   */
  setBlockedDomains(domains: readonly string[]): void {
    this.#blocked = blockedDomainMatcher(domains);
  }

  constructor(policy: EgressPolicy, log: Logger, options: EgressOptions = {}) {
    this.#policy = policy;
    this.#log = log;
    this.#opts = { ...DEFAULTS, ...options };
    this.#blocked = blockedDomainMatcher(policy.blockedDomains);
    this.#proxy = policy.upstream;
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
      this.#onConnect(req, socket as net.Socket, head),
    );
    this.#server.on('upgrade', (req, socket, head) =>
      this.#onUpgrade(req, socket as net.Socket, head),
    );
    this.#server.on('clientError', (err, socket) => this.#onClientError(err, socket as net.Socket));
    this.#agent = new http.Agent({
      keepAlive: true,
      timeout: this.#opts.idleTimeoutMs,
      maxTotalSockets: this.#opts.maxConnections,
    });
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
    for (const s of [...this.#clients, ...this.#refused, ...this.#upstreams]) s.destroy();
    for (const s of this.#parked.values()) s.destroy();
    this.#parked.clear();
    this.#agent.destroy();
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
      const addresses = await this.#admit('navigate', { host, port });
      if (net.isIP(host) === 0) {
        // the navigation's own connection follows at once: it uses these, not a second lookup
        const key = host.toLowerCase();
        this.#checked.delete(key);
        this.#checked.set(key, { at: Date.now(), addresses });
        if (this.#checked.size > MAX_CHECKED) {
          this.#checked.delete(this.#checked.keys().next().value!);
        }
      }
      // the navigation's connection is made now, and kept for it: a target that refuses it (or
      // never answers) fails the navigation the way it fails in Chromium, not with a 502 page
      const upstream = this.#chained(host);
      const target = { host, port };
      const socket = upstream
        ? await this.#tunnel(upstream, target)
        : await this.#dial(target, addresses);
      this.#park(target, socket, upstream);
      return undefined;
    } catch (err) {
      const r = this.#asRefusal(err);
      this.#logRefusal('navigate', r);
      return { code: r.code, message: r.message };
    }
  }

  // ---- policy ----

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
   * `alsoNamed` is the `Host` header's host, which must pass the name rule too.
   */
  async #admit(kind: Kind, target: Authority, alsoNamed?: string): Promise<LookupAddress[]> {
    let addresses: LookupAddress[];
    try {
      for (const name of alsoNamed === undefined ? [target.host] : [target.host, alsoNamed]) {
        const hit = this.#blocked(name);
        if (hit !== undefined) {
          throw new Refusal(
            403,
            'blocked_domain',
            `${name} is blocked (${hit}); ${refusalHint('blocked_domain', target.port)}`,
          );
        }
      }
      const family = net.isIP(target.host);
      addresses = family ? [{ address: target.host, family }] : await this.#resolve(target.host);
      const access = this.#access();
      const refused = checkAddresses(
        access,
        addresses.map((a) => a.address),
        target.port,
        hostAddresses(),
      );
      if (refused) {
        const hint = refusalHint(refused.code, target.port);
        throw new Refusal(
          403,
          refused.code,
          hint ? `${refused.message}; ${hint}` : refused.message,
        );
      }
    } catch (err) {
      const r = this.#asRefusal(err);
      // a name this host cannot resolve may still be one the upstream can: it resolves it there
      if (r.code === 'dns_failed' && this.#chained(target.host)) {
        this.#log.debug({ egress: kind, target: label(target), decision: 'to upstream' });
        return [];
      }
      throw r;
    }
    this.#log.debug({ egress: kind, target: label(target), decision: 'allowed' });
    return addresses;
  }

  // ---- the upstream proxy ----

  /** The upstream a connection to `host` goes through, unless none is set or `host` bypasses it. */
  #chained(host: string): UpstreamProxy | undefined {
    const u = this.#proxy;
    return u && !bypasses(u, host) ? u : undefined;
  }

  /** A connection to a checked target: through the upstream when chained, else direct. */
  async #open(target: Authority, addresses: readonly LookupAddress[]): Promise<net.Socket> {
    const upstream = this.#chained(target.host);
    const key = parkedKey(target, upstream);
    const parked = this.#parked.get(key);
    if (parked) {
      this.#parked.delete(key);
      if (!parked.destroyed) return parked;
    }
    if (!upstream) return this.#dial(target, addresses);
    return this.#tunnel(upstream, target);
  }

  /**
   * Keep a connection `check` opened (direct, or a tunnel through `via`) for the connection that
   * follows (or destroy it unused). A plain-HTTP request goes through the shared agent and leaves
   * it unused: it is then only the connection a local browser's preconnect would have made.
   */
  #park(target: Authority, socket: net.Socket, via: UpstreamProxy | undefined): void {
    const key = parkedKey(target, via);
    this.#parked.get(key)?.destroy();
    this.#parked.set(key, socket);
    const timer = setTimeout(() => {
      if (this.#parked.get(key) === socket) this.#parked.delete(key);
      socket.destroy();
    }, PARKED_TTL_MS);
    timer.unref();
    socket.once('close', () => {
      clearTimeout(timer);
      if (this.#parked.get(key) === socket) this.#parked.delete(key);
    });
    // a connection of a closed egress, or one whose route setUpstream changed meanwhile, is not kept
    if (this.#closed || this.#chained(target.host) !== via) socket.destroy();
  }

  /**
   * A tunnel to `target` through `u`: the upstream's own address is checked like any target (the
   * host's ports only where the operator allowed them), then the connection, TLS for `https://`,
   * and the proxy's handshake, all within the connect deadline. Failures are Refusals with the
   * `proxy_*` codes, logged as a warning once per code.
   */
  async #tunnel(u: UpstreamProxy, target: Authority): Promise<net.Socket> {
    const hop = { host: u.host, port: u.port };
    let addresses: LookupAddress[];
    try {
      addresses = await this.#admitHop(hop);
    } catch (err) {
      const r = this.#asRefusal(err);
      throw this.#upstreamFailed(
        r.code === 'dns_failed' || r.code === 'timeout'
          ? new Refusal(
              502,
              'proxy_unreachable',
              `upstream proxy ${upstreamLabel(u)}: ${r.message}`,
            )
          : new Refusal(403, 'proxy_refused', `upstream proxy ${upstreamLabel(u)}: ${r.message}`),
      );
    }
    let socket: net.Socket;
    try {
      socket = await this.#dial(hop, addresses);
    } catch (err) {
      const r = this.#asRefusal(err);
      throw this.#upstreamFailed(
        new Refusal(502, 'proxy_unreachable', `upstream proxy ${upstreamLabel(u)}: ${r.message}`),
      );
    }
    const ms = this.#opts.connectTimeoutMs;
    const timer = setTimeout(() => socket.destroy(new Error(`no answer within ${ms} ms`)), ms);
    try {
      if (u.scheme === 'https') socket = await this.#secure(socket, u);
      await openTunnel(socket, u, target);
      clearTimeout(timer);
      if (socket.destroyed) throw new UpstreamFailure('proxy_unreachable', 'closed');
      this.#log.debug({ egress: 'upstream', target: label(target), via: upstreamLabel(u) });
      return socket;
    } catch (err) {
      clearTimeout(timer);
      socket.destroy();
      const r =
        err instanceof UpstreamFailure
          ? new Refusal(502, err.code, err.message)
          : new Refusal(
              502,
              'proxy_unreachable',
              `upstream proxy ${upstreamLabel(u)}: ${errorCode(err)}`,
            );
      throw this.#upstreamFailed(r);
    }
  }

  /** The upstream's own address, checked and resolved like a target's (no blocked domains). */
  async #admitHop(hop: Authority): Promise<LookupAddress[]> {
    const family = net.isIP(hop.host);
    const addresses = family ? [{ address: hop.host, family }] : await this.#resolve(hop.host);
    const access = this.#access();
    const refused = checkAddresses(
      access,
      addresses.map((a) => a.address),
      hop.port,
      hostAddresses(),
    );
    if (refused) {
      const hint = refusalHint(refused.code, hop.port);
      throw new Refusal(403, refused.code, hint ? `${refused.message}; ${hint}` : refused.message);
    }
    return addresses;
  }

  /** TLS to an `https://` upstream, its certificate checked against its name. */
  #secure(socket: net.Socket, u: UpstreamProxy): Promise<net.Socket> {
    return new Promise((resolve, reject) => {
      const secure = tls.connect({
        socket,
        ...(net.isIP(u.host) === 0 && { servername: u.host }),
        ALPNProtocols: ['http/1.1'],
      });
      this.#trackUpstream(secure);
      secure.once('secureConnect', () => resolve(secure));
      secure.once('error', (err) =>
        reject(
          new UpstreamFailure('proxy_unreachable', `${upstreamLabel(u)}: TLS ${errorCode(err)}`),
        ),
      );
      secure.once('close', () =>
        reject(new UpstreamFailure('proxy_unreachable', `${upstreamLabel(u)}: TLS closed`)),
      );
    });
  }

  /** Log an upstream failure (a warning the first time per code) and hand it back. */
  #upstreamFailed(r: Refusal): Refusal {
    const entry = { egress: 'upstream', decision: 'failed', code: r.code, reason: r.message };
    if (!this.#upstreamWarned.has(r.code)) {
      this.#upstreamWarned.add(r.code);
      this.#log.warn(entry, 'egress: the upstream proxy failed');
      this.#policy.onEvent?.(r.code, `the upstream proxy failed: ${r.message}`);
    } else this.#log.debug(entry);
    return r;
  }

  async #resolve(host: string): Promise<LookupAddress[]> {
    // RFC 6761: localhost and its subdomains are loopback, whatever DNS says (browsers agree)
    const name = host.toLowerCase().replace(/\.+$/, '');
    if (name === 'localhost' || name.endsWith('.localhost')) {
      return [
        { address: '127.0.0.1', family: 4 },
        { address: '::1', family: 6 },
      ];
    }
    const checked = this.#checked.get(host.toLowerCase());
    if (checked) {
      this.#checked.delete(host.toLowerCase());
      // used once, and only fresh: a later connection asks DNS again (the addresses are checked
      // again by the caller either way)
      if (Date.now() - checked.at <= CHECKED_TTL_MS) return checked.addresses;
    }
    const ms = this.#opts.connectTimeoutMs;
    try {
      const found = await withDeadline(
        lookup(host, { all: true, verbatim: true }),
        ms,
        () => new Refusal(504, 'timeout', `resolving ${host} took over ${ms} ms`),
      );
      if (found.length === 0) throw new Refusal(502, 'dns_failed', `${host} has no address`);
      return found;
    } catch (err) {
      if (err instanceof Refusal) throw err;
      throw new Refusal(502, 'dns_failed', `cannot resolve ${host} (${errorCode(err)})`);
    }
  }

  #asRefusal(err: unknown): Refusal {
    if (err instanceof Refusal) return err;
    this.#log.error({ egress: 'internal', err: errorCode(err) }, 'egress: unexpected error');
    return new Refusal(500, 'internal', 'internal error');
  }

  // ---- connections ----

  #trackUpstream(socket: net.Socket): void {
    if (this.#upstreams.has(socket)) return; // a kept-alive socket, seen again
    this.#upstreams.add(socket);
    socket.on('error', (err) => this.#log.debug({ egress: 'upstream', err: errorCode(err) }));
    socket.once('close', () => this.#upstreams.delete(socket));
    if (this.#closed) socket.destroy();
  }

  /** TCP connection to a checked target, within the connect deadline. */
  #dial(target: Authority, addresses: readonly LookupAddress[]): Promise<net.Socket> {
    const ms = this.#opts.connectTimeoutMs;
    return new Promise((resolve, reject) => {
      const socket = background(
        net.connect({
          host: target.host,
          port: target.port,
          lookup: pinnedLookup(addresses),
          autoSelectFamily: true,
          allowHalfOpen: true,
          noDelay: true,
          keepAlive: true,
          keepAliveInitialDelay: 30_000,
        }),
      );
      const timer = setTimeout(() => {
        reject(new Refusal(504, 'timeout', `connecting to ${label(target)} took over ${ms} ms`));
        socket.destroy();
      }, ms);
      socket.once('connect', () => {
        clearTimeout(timer);
        resolve(socket);
      });
      socket.once('error', (err) => {
        reject(new Refusal(502, 'connect_failed', `${label(target)}: ${errorCode(err)}`));
      });
      socket.once('close', () => {
        clearTimeout(timer);
        reject(new Refusal(502, 'connect_failed', `${label(target)}: closed`));
      });
      this.#trackUpstream(socket);
    });
  }

  /** Apply the connect deadline to a client request's socket, when it is a new one. */
  #watchConnect(req: http.ClientRequest, target: Authority): void {
    req.once('socket', (socket) => {
      this.#trackUpstream(socket);
      if (!socket.connecting) return;
      const ms = this.#opts.connectTimeoutMs;
      const timer = setTimeout(
        () =>
          req.destroy(
            new Refusal(504, 'timeout', `connecting to ${label(target)} took over ${ms} ms`),
          ),
        ms,
      );
      socket.once('connect', () => clearTimeout(timer));
      socket.once('close', () => clearTimeout(timer));
    });
  }

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
    const r = this.#asRefusal(err);
    this.#logRefusal(kind, r);
    try {
      hangUp(socket, plainResponse(r.status, r.code, r.message));
    } catch {
      socket.destroy();
    }
  }

  #refuseResponse(res: http.ServerResponse, err: unknown): void {
    const r = this.#asRefusal(err);
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

  /**
   * Join a client and an upstream socket both ways, half-close included. With `sniff`, client
   * bytes are held back until they are known not to be a TLS ClientHello naming a blocked domain.
   */
  #splice(client: net.Socket, upstream: net.Socket, head: Buffer, sniff: Authority | undefined) {
    client.setTimeout(0); // a tunnel may idle for long (WebSockets); keepalive finds dead peers
    client.allowHalfOpen = true;
    upstream.allowHalfOpen = true;
    // Once one side is closed both ways, nothing more can reach it: the other side sends what it
    // still holds, then goes too (at once after an error).
    client.once('close', (hadError) => (hadError ? upstream.destroy() : hangUp(upstream)));
    upstream.once('close', (hadError) => (hadError ? client.destroy() : hangUp(client)));
    upstream.pipe(client);

    const forward = (first: Buffer) => {
      if (first.length > 0) upstream.write(first);
      client.pipe(upstream);
      if (client.readableEnded && !upstream.writableEnded) upstream.end();
    };
    if (sniff === undefined) {
      forward(head);
      return;
    }

    let held = head;
    let timer: NodeJS.Timeout | undefined;
    const settle = () => {
      clearTimeout(timer);
      client.off('data', onData);
      client.off('end', onEnd);
      client.off('close', settle);
    };
    const refuse = (code: EgressRefusalCode, detail: object) => {
      settle();
      this.#log.debug({
        egress: 'connect',
        target: label(sniff),
        decision: 'refused',
        code,
        ...detail,
      });
      upstream.destroy();
      hangUp(client, TLS_ACCESS_DENIED);
    };
    // Decide on what is held; true once decided (forwarded or refused).
    const decide = (): boolean => {
      const hello = sniffClientHello(held);
      switch (hello.kind) {
        case 'incomplete':
          if (held.length === 0) return false;
          if (held.length > MAX_SNIFF_BYTES) {
            refuse('tls_invalid', { reason: 'ClientHello too large' });
            return true;
          }
          timer ??= setTimeout(
            () => refuse('timeout', { reason: 'ClientHello incomplete' }),
            this.#opts.helloTimeoutMs,
          ).unref();
          return false;
        case 'invalid':
          refuse('tls_invalid', { reason: hello.reason });
          return true;
        case 'client-hello': {
          for (const name of hello.serverNames) {
            const hit = this.#blocked(name);
            if (hit !== undefined) {
              refuse('blocked_sni', { server_name: name });
              return true;
            }
          }
          break;
        }
        case 'not-tls':
          break;
      }
      settle();
      forward(held);
      return true;
    };
    const onData = (chunk: Buffer) => {
      held = held.length === 0 ? chunk : Buffer.concat([held, chunk]);
      decide();
    };
    const onEnd = () => {
      // The client finished sending before a decision: nothing at all passes, or a partial hello.
      if (held.length === 0) {
        settle();
        forward(held);
      } else refuse('tls_invalid', { reason: 'client closed mid-ClientHello' });
    };
    if (decide()) return;
    client.on('data', onData);
    client.once('end', onEnd);
    client.once('close', settle);
  }

  // ---- CONNECT ----

  #onConnect(req: http.IncomingMessage, socket: net.Socket, head: Buffer): void {
    this.#openTunnel(req, socket, head).catch((err: unknown) =>
      this.#refuseRaw('connect', socket, err),
    );
  }

  async #openTunnel(req: http.IncomingMessage, socket: net.Socket, head: Buffer): Promise<void> {
    const target = parseAuthority(req.url ?? '');
    if (target === undefined) throw new Refusal(400, 'bad_request', 'CONNECT needs host:port');
    const addresses = await this.#admit('connect', target);
    const upstream = await this.#open(target, addresses);
    if (socket.destroyed || this.#closed) {
      upstream.destroy();
      return;
    }
    socket.write('HTTP/1.1 200 Connection Established\r\n\r\n');
    this.#splice(socket, upstream, head, target);
  }

  // ---- absolute-form requests ----

  /** Target, `Host` header and body framing of an absolute-form request, or a 400 Refusal. */
  #requestTarget(req: http.IncomingMessage): {
    target: ProxyTarget;
    host: Authority | undefined;
    framing: Framing;
  } {
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
    if (values[0] === undefined) return { target, host: undefined, framing };
    const host = parseAuthority(values[0], target.port);
    if (host === undefined) throw new Refusal(400, 'bad_request', 'malformed Host header');
    return { target, host, framing };
  }

  #onRequest(req: http.IncomingMessage, res: http.ServerResponse): void {
    const socket = req.socket as net.Socket;
    this.#inFlight.set(socket, (this.#inFlight.get(socket) ?? 0) + 1);
    res.once('close', () => this.#inFlight.set(socket, (this.#inFlight.get(socket) ?? 1) - 1));
    // A request in flight is not idle (long polls wait for minutes); Node then skips the timeout.
    res.on('timeout', () => {});
    this.#forward(req, res).catch((err: unknown) => this.#refuseResponse(res, err));
  }

  /**
   * The request to the checked addresses of `target` that relays `req`: origin-form path, the
   * client's headers without hop-by-hop ones, a Host header when the client sent none, and the
   * body framing the client's head was read with (a chunked body stays chunked on every method:
   * Node would send a GET's body unframed, which the upstream would read as a second request).
   * Upgrades get a connection of their own (it becomes the tunnel); plain requests share the agent.
   */
  #request(
    req: http.IncomingMessage,
    target: ProxyTarget,
    host: Authority | undefined,
    framing: Framing,
    addresses: readonly LookupAddress[],
    upgrade: boolean,
  ): http.ClientRequest {
    const headers = forwardHeaders(req.rawHeaders, upgrade ? { upgrade: true } : {});
    if (host === undefined) headers.push('Host', hostHeader(target));
    if (framing.kind === 'chunked') headers.push('Transfer-Encoding', 'chunked');
    // through an upstream proxy, each request gets a tunnel of its own (no keep-alive pool)
    const chained = this.#chained(target.host) !== undefined;
    const up = http.request({
      // no agent at all when chained: Node uses `createConnection` only without one
      agent: chained ? undefined : upgrade ? false : this.#agent,
      host: target.host,
      port: target.port,
      method: req.method ?? 'GET',
      path: target.path,
      headers,
      setHost: false,
      lookup: pinnedLookup(addresses), // Node 20 tries each address (autoSelectFamily)
      ...(chained && {
        createConnection: (_opts: unknown, done: (err: Error | null, s: net.Socket) => void) => {
          this.#open(target, addresses).then(
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
    this.#watchConnect(up, target);
    return up;
  }

  async #forward(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const { target, host, framing } = this.#requestTarget(req);
    const addresses = await this.#admit('http', target, host?.host);
    if (res.destroyed || this.#closed) return;
    const up = this.#request(req, target, host, framing, addresses, false);
    up.once('response', (upRes) => {
      upRes.on('error', () => res.destroy());
      try {
        res.writeHead(
          upRes.statusCode ?? 502,
          upRes.statusMessage,
          forwardHeaders(upRes.rawHeaders),
        );
      } catch (err) {
        upRes.destroy();
        this.#refuseResponse(
          res,
          new Refusal(502, 'upstream_failed', `${label(target)}: bad response (${errorCode(err)})`),
        );
        return;
      }
      upRes.pipe(res);
    });
    up.on('error', (err) => {
      this.#refuseResponse(
        res,
        err instanceof Refusal
          ? err
          : new Refusal(502, 'upstream_failed', `${label(target)}: ${errorCode(err)}`),
      );
    });
    res.once('close', () => {
      if (!res.writableFinished) up.destroy();
    });
    req.on('error', () => up.destroy());
    req.pipe(up);
  }

  // ---- absolute-form upgrades (WebSocket over plain HTTP) ----

  #onUpgrade(req: http.IncomingMessage, socket: net.Socket, head: Buffer): void {
    this.#openUpgrade(req, socket, head).catch((err: unknown) =>
      this.#refuseRaw('upgrade', socket, err),
    );
  }

  async #openUpgrade(req: http.IncomingMessage, socket: net.Socket, head: Buffer): Promise<void> {
    const { target, host, framing } = this.#requestTarget(req);
    // what follows an upgrade's head is the new protocol, relayed only after the upstream's 101
    if (framing.kind !== 'none') {
      throw new Refusal(400, 'bad_request', 'an upgrade request cannot have a body');
    }
    const addresses = await this.#admit('upgrade', target, host?.host);
    if (socket.destroyed || this.#closed) return;
    const up = this.#request(req, target, host, framing, addresses, true);
    let answered = false;
    socket.once('close', () => {
      if (!answered) up.destroy();
    });
    up.once('upgrade', (upRes, upSocket, upHead) => {
      answered = true;
      socket.write(
        responseHead(upRes.statusCode ?? 101, upRes.statusMessage ?? '', upRes.rawHeaders),
      );
      if (upHead.length > 0) socket.write(upHead);
      this.#splice(socket, upSocket as net.Socket, head, undefined);
    });
    up.once('response', (upRes) => {
      // The server declined the switch: relay its answer as a plain response and close.
      answered = true;
      upRes.on('error', () => socket.destroy());
      const status = upRes.statusCode ?? 502;
      socket.write(
        responseHead(status, upRes.statusMessage ?? '', [
          ...forwardHeaders(upRes.rawHeaders),
          'Connection',
          'close',
        ]),
      );
      upRes.pipe(socket);
    });
    up.on('error', (err) => {
      if (answered) socket.destroy();
      else
        this.#refuseRaw(
          'upgrade',
          socket,
          err instanceof Refusal
            ? err
            : new Refusal(502, 'upstream_failed', `${label(target)}: ${errorCode(err)}`),
        );
    });
    up.end();
  }

  // ---- parse errors ----

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
