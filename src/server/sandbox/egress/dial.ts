/**
 * The egress's own connections out: names resolved here, once, and every connection made to the
 * very addresses that were checked (`pinnedLookup`: Node asks no resolver again, so DNS rebinding
 * cannot swap them between the check and the connection); resolving and connecting each within
 * the connect deadline; every socket made on an instance's behalf tracked, so that `close()` ends
 * them all, tunnels included.
 *
 * It decides nothing: the addresses it is given have passed admission (`Egress`), and the names it
 * resolves are checked by its caller after it answers.
 */
import type { LookupAddress } from 'node:dns';
import { lookup } from 'node:dns/promises';
import { once } from 'node:events';
import http from 'node:http';
import net from 'node:net';
import { background } from '../../../internal/background.js';
import { withDeadline } from '../../../internal/deadline.js';
import type { Logger } from '../../../internal/log.js';
import { label, type Authority } from './proxy-http.js';
import { errorCode, Refusal } from './refusal.js';

/** How long a name `Egress.check` resolved is reused by the connection that follows it, in ms. */
const CHECKED_TTL_MS = 5_000;
/** Names remembered so at most. */
const MAX_CHECKED = 64;

/** Why a connection closed before it connected gives up (the egress closing destroyed it). */
const CLOSED = new Error('closed');

/** A `lookup` that answers with addresses already resolved and checked, never asking DNS again. */
export function pinnedLookup(addresses: readonly LookupAddress[]): net.LookupFunction {
  return (_hostname, options, callback) => {
    if (options.all) callback(null, [...addresses]);
    else callback(null, addresses[0]!.address, addresses[0]!.family);
  };
}

export interface DialerOptions {
  /** Deadline for resolving a name, and again for connecting to it, in ms. */
  connectTimeoutMs: number;
  /** Upstream connection of plain HTTP requests kept idle at most so long, in ms. */
  idleTimeoutMs: number;
  /** Upstream connections of plain HTTP requests open at once (more queue). */
  maxConnections: number;
}

export class Dialer {
  readonly #opts: DialerOptions;
  readonly #log: Logger;
  /** Keeps upstream connections of plain HTTP requests alive between requests. */
  readonly agent: http.Agent;
  /** Every socket out: direct, through the upstream, the agent's. */
  readonly #outbound = new Set<net.Socket>();
  /** Names `Egress.check` resolved a moment ago, oldest first: the next connection reuses them. */
  readonly #checked = new Map<string, { at: number; addresses: LookupAddress[] }>();
  #closed = false;

  constructor(opts: DialerOptions, log: Logger) {
    this.#opts = opts;
    this.#log = log;
    this.agent = new http.Agent({
      keepAlive: true,
      timeout: opts.idleTimeoutMs,
      maxTotalSockets: opts.maxConnections,
    });
  }

  /** Destroy every connection out, and the agent's pool. Idempotent. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    for (const s of this.#outbound) s.destroy();
    this.agent.destroy();
  }

  /**
   * Keep the addresses `host` resolved to for the connection that follows at once (the
   * navigation's own, after `Egress.check`): it uses these, not a second lookup.
   */
  remember(host: string, addresses: LookupAddress[]): void {
    const key = host.toLowerCase();
    this.#checked.delete(key);
    this.#checked.set(key, { at: Date.now(), addresses });
    if (this.#checked.size > MAX_CHECKED) this.#checked.delete(this.#checked.keys().next().value!);
  }

  /** The addresses of `host`, within the connect deadline, or a Refusal (`dns_failed`, `timeout`). */
  async resolve(host: string): Promise<LookupAddress[]> {
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

  /** TCP connection to a checked target, to its checked addresses only, within the deadline. */
  async connect(target: Authority, addresses: readonly LookupAddress[]): Promise<net.Socket> {
    const ms = this.#opts.connectTimeoutMs;
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
    this.track(socket);
    // closed before it connected (the egress closing): stop waiting at once
    const stop = new AbortController();
    const onClose = () => stop.abort(CLOSED);
    socket.once('close', onClose);
    try {
      await withDeadline(
        once(socket, 'connect', { signal: stop.signal }),
        ms,
        () => new Refusal(504, 'timeout', `connecting to ${label(target)} took over ${ms} ms`),
      );
      return socket;
    } catch (err) {
      stop.abort(); // the listeners of `once`, after a timeout
      socket.destroy();
      if (err instanceof Refusal) throw err;
      // `once` rejects with the socket's error, or with an AbortError caused by `CLOSED`
      const why = (err as { cause?: unknown }).cause === CLOSED ? 'closed' : errorCode(err);
      throw new Refusal(502, 'connect_failed', `${label(target)}: ${why}`);
    } finally {
      socket.off('close', onClose);
    }
  }

  /** Apply the connect deadline to a client request's socket, when it is a new one. */
  watchConnect(req: http.ClientRequest, target: Authority): void {
    req.once('socket', (socket) => {
      this.track(socket);
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

  /** Count `socket` among the connections out, destroyed by `close()` (at once if closed). */
  track(socket: net.Socket): void {
    if (this.#outbound.has(socket)) return; // a kept-alive socket, seen again
    this.#outbound.add(socket);
    socket.on('error', (err) => this.#log.debug({ egress: 'upstream', err: errorCode(err) }));
    socket.once('close', () => this.#outbound.delete(socket));
    if (this.#closed) socket.destroy();
  }
}
