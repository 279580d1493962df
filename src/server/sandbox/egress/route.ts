/**
 * How a target that passed admission is reached: by the connection `Egress.check` opened for it a
 * moment ago (parked for the navigation that follows), directly (`Dialer`), or through the
 * instance's upstream proxy (`proxy` of the start) unless the target is on its bypass list.
 *
 * A tunnel through the upstream is made with the same care as a direct connection: the upstream's
 * own address passes the address rules first (`admitHop`: the host's ports only where the
 * operator allowed them, burrow's ports and link-local never), then the connection, TLS for
 * `https://` (its certificate checked against its name) and the proxy's handshake (upstream.ts),
 * all within the connect deadline. Its failures are `proxy_*` Refusals, told to the operator's log
 * and the instance's events once per kind; its credentials never appear in either.
 */
import type { LookupAddress } from 'node:dns';
import net from 'node:net';
import tls from 'node:tls';
import type { Logger } from '../../../internal/log.js';
import type { Dialer } from './dial.js';
import { label, type Authority } from './proxy-http.js';
import { asRefusal, errorCode, Refusal } from './refusal.js';
import {
  bypasses,
  openTunnel,
  UpstreamFailure,
  upstreamLabel,
  type UpstreamProxy,
} from './upstream.js';

/** How long a connection `Egress.check` opened waits for the connection it is for, in ms. */
const PARKED_TTL_MS = 5_000;

/** A parked connection's key: its target, and whether it is a tunnel through the upstream. */
const parkedKey = (target: Authority, via: UpstreamProxy | undefined) =>
  `${via ? 'upstream' : 'direct'} ${label(target)}`;

export interface RoutesOptions {
  /** The upstream at first (`setUpstream` changes it). */
  upstream: UpstreamProxy | undefined;
  dialer: Dialer;
  /** The upstream's own address, checked and resolved like a target's, or a Refusal. */
  admitHop: (hop: Authority) => Promise<LookupAddress[]>;
  /** Deadline for TLS and the proxy's handshake together, in ms. */
  connectTimeoutMs: number;
  log: Logger;
  /** Told of an upstream failure, once per code (`EgressPolicy.onEvent`). */
  onEvent?: ((type: string, message: string) => void) | undefined;
}

export class Routes {
  readonly #opts: RoutesOptions;
  #proxy: UpstreamProxy | undefined;
  /** Connections `Egress.check` opened, for the navigation's own connection. */
  readonly #parked = new Map<string, net.Socket>();
  /** Upstream failure codes already logged as warnings. */
  readonly #warned = new Set<string>();
  #closed = false;

  constructor(opts: RoutesOptions) {
    this.#opts = opts;
    this.#proxy = opts.upstream;
  }

  /** Chain to `upstream` from now on, or directly with `undefined`; parked connections go. */
  setUpstream(upstream: UpstreamProxy | undefined): void {
    this.#proxy = upstream;
    for (const s of this.#parked.values()) s.destroy();
    this.#parked.clear();
  }

  /** Destroy the parked connections; none is parked after. Idempotent. */
  close(): void {
    this.#closed = true;
    for (const s of this.#parked.values()) s.destroy();
    this.#parked.clear();
  }

  /** The upstream a connection to `host` goes through, unless none is set or `host` bypasses it. */
  chained(host: string): UpstreamProxy | undefined {
    const u = this.#proxy;
    return u && !bypasses(u, host) ? u : undefined;
  }

  /** A connection to a checked target: the parked one, else through the upstream or direct. */
  async open(target: Authority, addresses: readonly LookupAddress[]): Promise<net.Socket> {
    const upstream = this.chained(target.host);
    const key = parkedKey(target, upstream);
    const parked = this.#parked.get(key);
    if (parked) {
      this.#parked.delete(key);
      if (!parked.destroyed) return parked;
    }
    if (!upstream) return this.#opts.dialer.connect(target, addresses);
    return this.#tunnel(upstream, target);
  }

  /**
   * Open the connection to a checked target now and park it for the connection that follows (a
   * navigation's): a target that refuses it, or never answers, fails here with its Refusal.
   */
  async preconnect(target: Authority, addresses: readonly LookupAddress[]): Promise<void> {
    const upstream = this.chained(target.host);
    const socket = upstream
      ? await this.#tunnel(upstream, target)
      : await this.#opts.dialer.connect(target, addresses);
    this.#park(target, socket, upstream);
  }

  /**
   * Keep a connection `preconnect` opened (direct, or a tunnel through `via`) for the connection
   * that follows (or destroy it unused). A plain-HTTP request goes through the shared agent and
   * leaves it unused: it is then only the connection a local browser's preconnect would have made.
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
    if (this.#closed || this.chained(target.host) !== via) socket.destroy();
  }

  /** A tunnel to `target` through `u`, or a `proxy_*` Refusal (see the header). */
  async #tunnel(u: UpstreamProxy, target: Authority): Promise<net.Socket> {
    const { dialer, log } = this.#opts;
    const hop = { host: u.host, port: u.port };
    let addresses: LookupAddress[];
    try {
      addresses = await this.#opts.admitHop(hop);
    } catch (err) {
      const r = asRefusal(err, log);
      throw this.#failed(
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
      socket = await dialer.connect(hop, addresses);
    } catch (err) {
      const r = asRefusal(err, log);
      throw this.#failed(
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
      log.debug({ egress: 'upstream', target: label(target), via: upstreamLabel(u) });
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
      throw this.#failed(r);
    }
  }

  /** TLS to an `https://` upstream, its certificate checked against its name. */
  #secure(socket: net.Socket, u: UpstreamProxy): Promise<net.Socket> {
    return new Promise((resolve, reject) => {
      const secure = tls.connect({
        socket,
        ...(net.isIP(u.host) === 0 && { servername: u.host }),
        ALPNProtocols: ['http/1.1'],
      });
      this.#opts.dialer.track(secure);
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
  #failed(r: Refusal): Refusal {
    const entry = { egress: 'upstream', decision: 'failed', code: r.code, reason: r.message };
    if (!this.#warned.has(r.code)) {
      this.#warned.add(r.code);
      this.#opts.log.warn(entry, 'egress: the upstream proxy failed');
      this.#opts.onEvent?.(r.code, `the upstream proxy failed: ${r.message}`);
    } else this.#opts.log.debug(entry);
    return r;
  }
}
