/**
 * One DevTools pipe, many connections: the server's own (`root`) and any number of relay
 * clients, each of which behaves as if it had a DevTools connection of its own.
 *
 * - A client is given a session of its own, attached by the server: the browser target
 *   (`Target.attachToBrowserTarget`, flattened) or, for a page endpoint, that page
 *   (`Target.attachToTarget`). Its commands without `sessionId` go on that session; a command
 *   naming a session goes out only if the session is the client's.
 * - The client owns the sessions attached through its sessions: announced by
 *   `Target.attachedToTarget` on them (auto-attach, nested too) or answered to its
 *   `Target.attachTo*` commands; `Target.detachedFromTarget` ends them. Chromium names every
 *   session anew, so a client can neither guess nor obtain another's.
 * - Every command gets a wire id from one counter; the reply goes back to its sender with the
 *   sender's own id. Events of a client's own session reach it without `sessionId`, events of
 *   its other sessions as they are; everything else (the root session, the server's sessions)
 *   goes to the server.
 * - A client that goes away has its session detached, which ends the sessions under it; when
 *   Chromium detaches a client's session (its page closed) the client is closed.
 *
 * Messages from Chromium are routed on their first and last bytes, without decoding (wire.ts);
 * commands from clients are parsed (small) or located (large: their params pass as bytes,
 * command.ts) and written anew: Chromium then reads exactly the fields that the ownership check
 * saw. The few methods whose params the mux reads are refused when too large to decode. A navigation the egress would refuse is failed by a trap (trap.ts).
 */
import { CDP_MAX_ROOT_EVENT_BYTES, CDP_MAX_ROOT_REPLY_BYTES } from '../../api/cdp-limits.js';
import { ClientState as Client, type Closing, type MuxPeer } from './mux-client.js';
import { INBOUND_CLOSE, InboundGate, PIPE_FAILED } from './inbound.js';
import { CdpMessageTooLarge, type CdpPipe } from './pipe.js';
import { refusal } from './refusals.js';
import { NavigationTraps } from './trap.js';
import type { CdpCommand, CdpParams, CdpTransport, CdpTransportReader } from './transport.js';
import { clientCommand, NOT_ONE_OBJECT, wholeObject, wireCommand } from './command.js';
import { errorReply, FAILED, incoming, type Incoming, type Parsed } from './wire.js';

/** One client's connection, from `CdpMux.open`. */
export interface MuxClient {
  /** Start delivering to `peer` (messages that arrived before are delivered first). */
  connect(peer: MuxPeer): void;
  /** A message from the client: one CDP command as JSON. */
  receive(data: Buffer): void;
  /** The client went away: forget it and detach its session. Idempotent. */
  close(): void;
}

export interface CdpMuxOptions {
  /** A tab was brought to front (`Target.activateTarget`, `Page.bringToFront`) by anyone. */
  onActivate?(targetId: string): void;
  /** A client's command's params as Chromium gets them (downloads.ts points downloads here). */
  rewrite?(method: string, params: CdpParams): CdpParams;
  /** A client created a browser context; called before the client sees the reply. */
  onContextCreated?(browserContextId: string): void;
  /** A client went away (Chromium resets what its session overrode, e.g. download behaviour). */
  onClientClosed?(): void;
  /**
   * A client's `Page.navigate`, before it reaches Chromium: `undefined` to let it go as it is,
   * or the `Fetch.failRequest` reason its document request is to fail with (the instance's egress
   * would refuse it). The client's later commands on that session wait meanwhile, so they keep
   * their order; its other sessions go on.
   */
  checkNavigation?(url: string): Promise<{ reason: string } | undefined>;
}

/** What a client attaches to: the browser, or one page target (`/devtools/page/<id>`). */
export type MuxTarget = { type: 'browser' } | { type: 'page'; targetId: string };

interface Pending {
  /** The sender's own id. */
  id: number;
  /** The client that sent it; undefined for the server's connection. */
  client?: Client | undefined;
  /** A command of the mux itself: the reply goes here and to nobody else. */
  settle?: ((reply: Incoming) => void) | undefined;
  /** The reply's sessionId is the client's from now on (`Target.attachTo*`), with its target. */
  adopt?: { targetId: string | undefined } | undefined;
  /** The reply, if a success, brings this target to front. */
  activates?: string | undefined;
  /** A client's `Target.createBrowserContext`: the mux hook hears of the context first. */
  createsContext?: boolean | undefined;
  /** Called when the reply arrives (a navigation's trap is released). */
  after?: (() => void) | undefined;
  /** Written at once, past what waits for Chromium (the gate's barrier, inbound.ts). */
  now?: boolean | undefined;
}

/**
 * Commands one client may have unanswered at once (each costs the server a routing entry until
 * Chromium answers, which may be never: a promise awaited forever). Playwright keeps a few dozen.
 */
export const MAX_IN_FLIGHT = 10_000;
/** Chromium parses `id` as a 32-bit integer. */
const MAX_WIRE_ID = 2 ** 31 - 1;

export class CdpMux {
  readonly #pipe: CdpPipe;
  /** Every write into the pipe, paced by what Chromium has taken in (inbound.ts). */
  readonly #gate: InboundGate;
  readonly #opts: CdpMuxOptions;
  readonly #pending = new Map<number, Pending>();
  /** Every session of every client (their own and those they own) → the client. */
  readonly #sessions = new Map<string, Client>();
  readonly #clients = new Set<Client>();
  /** Sessions of departed clients, until Chromium has detached them: their events are dropped. */
  readonly #retired = new Set<string>();
  /** Refused navigations being failed, and the sessions where clients intercept (trap.ts). */
  readonly #traps = new NavigationTraps({
    command: (method, params, sessionId) => this.#command(method, params, sessionId),
    fire: (method, params, sessionId) =>
      this.#send({ id: 0, method, params }, sessionId, {
        settle: () => {},
      }),
    detach: (sessionId) => this.#detach(sessionId),
  });
  #lastId = 0;
  #rootReader: CdpTransportReader | undefined;
  #open = true;

  /** The server's own connection: the root session and every session no client owns. */
  readonly root: CdpTransport;

  constructor(pipe: CdpPipe, opts: CdpMuxOptions = {}) {
    this.#pipe = pipe;
    this.#opts = opts;
    const isOpen = () => this.#open;
    this.root = {
      get isOpen() {
        return isOpen();
      },
      send: (command) => this.#send(command, command.sessionId, {}),
      listen: (reader) => {
        this.#rootReader = reader;
        if (!this.#open) reader.close();
      },
      close: () => this.close(),
    };
    const barrier = { id: 0, method: 'Browser.getVersion', params: {} };
    this.#gate = new InboundGate(pipe, {
      barrier: (settle) => this.#send(barrier, undefined, { settle, now: true }),
      overflow: (client) => this.#drop(client as Client, true, INBOUND_CLOSE),
      readers: () => this.#clients,
    });
    pipe.listen({ message: (data) => this.#receive(data), close: () => this.close() });
  }

  /** The instance is paused, or resumed: Chromium's silence meanwhile is not deafness. */
  freeze(frozen: boolean): void {
    this.#gate.freeze(frozen);
  }

  /**
   * Attach a session for a new client. Rejects when Chromium refuses (no such page) or the
   * browser is gone; the client is then never connected.
   */
  open(target: MuxTarget): Promise<MuxClient> {
    const [method, params]: [string, CdpParams] =
      target.type === 'browser'
        ? ['Target.attachToBrowserTarget', {}]
        : ['Target.attachToTarget', { targetId: target.targetId, flatten: true }];
    return new Promise((resolve, reject) => {
      if (!this.#open) return reject(new Error('the browser is gone'));
      this.#send({ id: 0, method, params }, undefined, {
        settle: (reply) => {
          let sessionId: unknown;
          try {
            sessionId = reply.ok ? reply.parse().result?.sessionId : undefined;
          } catch {
            /* malformed: refused below */
          }
          if (typeof sessionId !== 'string') return reject(new Error(`${method} failed`));
          if (!this.#open) return reject(new Error('the browser is gone'));
          // registered before any event of the session can arrive (the reply comes first)
          const client = new Client(
            sessionId,
            target.type === 'page' ? target.targetId : undefined,
          );
          this.#clients.add(client);
          this.#sessions.set(sessionId, client);
          resolve({
            connect: (peer) => client.connect(peer, this.#gate.paused),
            receive: (data) => this.#fromClient(client, data),
            close: () => this.#drop(client, true),
          });
        },
      });
    });
  }

  /** Close every client and the pipe; the server's connection ends too. Idempotent. */
  close(): void {
    if (!this.#open) return;
    this.#open = false;
    const why = this.#pipe.failure ? PIPE_FAILED : undefined;
    for (const client of [...this.#clients]) {
      this.#drop(client, false, why);
      client.peer?.close();
    }
    for (const p of this.#pending.values()) p.settle?.(FAILED);
    this.#pending.clear();
    this.#gate.close();
    this.#pipe.close();
    this.#rootReader?.close();
  }

  /** Deliver to a client; one that left too much unconnected is dropped (its peer is told). */
  #deliver(client: Client, data: Buffer): void {
    if (!client.deliver(data)) this.#drop(client, true);
  }

  /**
   * Forget a client; `detach` its session in Chromium too (unless Chromium ended it). With `why`
   * its peer is closed for that reason.
   */
  #drop(client: Client, detach: boolean, why?: Closing): void {
    if (client.closed) return;
    client.close();
    this.#gate.forget(client);
    if (why) client.peer?.close(why);
    this.#clients.delete(client);
    this.#sessions.delete(client.session);
    this.#traps.forget(client.session);
    for (const sessionId of client.owned.keys()) {
      this.#sessions.delete(sessionId);
      this.#traps.forget(sessionId);
    }
    // replies still on their way are dropped (wire ids count up: none is reused meanwhile)
    for (const [id, p] of this.#pending) if (p.client === client) this.#pending.delete(id);
    if (detach && this.#open) {
      // the sessions it owns are children of this one: Chromium ends them with it
      this.#detach(client.session, client.owned.keys());
    }
    if (this.#open) this.#opts.onClientClosed?.();
  }

  /**
   * Detach `session` (a client's, or one of the server's own) and with it the sessions it owns:
   * their events are dropped until Chromium has detached them.
   */
  #detach(session: string, owned: Iterable<string> = []): void {
    const sessions = [session, ...owned];
    for (const sessionId of sessions) this.#retired.add(sessionId);
    const params = { sessionId: session };
    this.#send({ id: 0, method: 'Target.detachFromTarget', params }, undefined, {
      settle: () => sessions.forEach((sessionId) => this.#retired.delete(sessionId)),
    });
  }

  // -- outgoing ----------------------------------------------------------------------------

  /** `raw`: the params as the bytes a client sent (a large command, command.ts). */
  #send(
    command: CdpCommand,
    sessionId: string | undefined,
    route: Omit<Pending, 'id'>,
    raw?: Buffer,
  ): void {
    if (!this.#open) return;
    const { method, params } = command;
    const pending: Pending = { id: command.id, ...route };
    if (method === 'Target.activateTarget' && typeof params.targetId === 'string') {
      pending.activates = params.targetId;
    } else if (method === 'Page.bringToFront' && route.client && sessionId !== undefined) {
      pending.activates = route.client.targetOf(sessionId);
    } else if (
      route.client &&
      (method === 'Target.attachToTarget' || method === 'Target.attachToBrowserTarget')
    ) {
      pending.adopt = {
        targetId: typeof params.targetId === 'string' ? params.targetId : undefined,
      };
    } else if (route.client && method === 'Target.createBrowserContext') {
      pending.createsContext = true;
    }
    const id = this.#nextId();
    const message = raw
      ? wireCommand(id, method, raw, sessionId)
      : JSON.stringify({ id, method, params, sessionId });
    // throws, having written nothing, for one too long for Chromium
    if (route.now) this.#pipe.send(message);
    else this.#gate.send(message, route.client);
    if (route.client?.closed) return; // it sent past its bound (inbound.ts)
    this.#pending.set(id, pending);
    if (route.client) route.client.inFlight++;
  }

  #nextId(): number {
    do this.#lastId = this.#lastId >= MAX_WIRE_ID ? 1 : this.#lastId + 1;
    while (this.#pending.has(this.#lastId));
    return this.#lastId;
  }

  /** Go on with what a client sent on `session` while its navigation was checked, in order. */
  #release(client: Client, session: string): void {
    client.release(session, (data) => this.#fromClient(client, data));
  }

  /** A command from a client: checked, given a wire id and its session, written anew. */
  #fromClient(client: Client, data: Buffer): void {
    if (client.closed) return;
    const checked = clientCommand(data);
    if ('refused' in checked) return this.#deliver(client, checked.refused);
    const { id, method, params, raw, sessionId } = checked;
    const refused = refusal(method, params);
    if (refused !== undefined) return this.#deliver(client, errorReply(id, -32000, refused));
    let wireSession = client.session;
    if (sessionId !== undefined) {
      if (typeof sessionId !== 'string' || !client.owned.has(sessionId)) {
        return this.#deliver(client, errorReply(id, -32001, 'Session with given id not found.'));
      }
      wireSession = sessionId;
    }
    if (client.holding(wireSession)) {
      if (!client.hold(wireSession, data)) {
        this.#drop(client, true);
        client.peer?.close();
      }
      return;
    }
    if (client.inFlight >= MAX_IN_FLIGHT) {
      return this.#deliver(
        client,
        errorReply(id, -32000, `More than ${MAX_IN_FLIGHT} commands awaiting their replies`),
      );
    }
    const sent = this.#opts.rewrite && !raw ? this.#opts.rewrite(method, params) : params;
    this.#traps.command(method, wireSession, client.targetOf(wireSession));
    const targetId = client.targetOf(wireSession);
    if (
      method === 'Page.navigate' &&
      this.#opts.checkNavigation &&
      typeof sent.url === 'string' &&
      targetId !== undefined
    ) {
      client.startHolding(wireSession);
      void this.#navigate(client, { id, method, params: sent }, wireSession, targetId);
      return;
    }
    if (raw) {
      client.startHolding(wireSession);
      void this.#large(client, { id, method, params }, wireSession, raw);
      return;
    }
    this.#sendFor(client, { id, method, params: sent }, wireSession);
  }

  /** Send a client's command (`after` its reply); one too long for Chromium gets an error. */
  #sendFor(client: Client, command: CdpCommand, session: string, raw?: Buffer, after?: () => void) {
    try {
      this.#send(command, session, { client, after }, raw);
    } catch (err) {
      after?.();
      if (!(err instanceof CdpMessageTooLarge)) throw err;
      this.#deliver(client, errorReply(command.id, -32000, err.message));
    }
  }

  /**
   * A client's large command (command.ts), sent once its params are found to be one object: the
   * pass yields to others, and the client's later messages on that session wait meanwhile.
   */
  async #large(client: Client, command: CdpCommand, wireSession: string, raw: Buffer) {
    const whole = await wholeObject(raw);
    if (client.closed) return;
    if (whole) this.#sendFor(client, command, wireSession, raw);
    else this.#deliver(client, errorReply(command.id, -32600, NOT_ONE_OBJECT));
    this.#release(client, wireSession);
  }

  /**
   * A client's `Page.navigate`, once the egress said whether it would refuse the URL: refused,
   * it goes out with a trap on its page (trap.ts) that fails its document request as a local
   * browser would, released when its reply comes. Meanwhile the client's later messages on that
   * session wait (`held`), and go on after it in order.
   */
  async #navigate(
    client: Client,
    command: CdpCommand,
    wireSession: string,
    targetId: string,
  ): Promise<void> {
    let release: (() => void) | undefined;
    try {
      const url = command.params.url as string;
      const refusal = await this.#opts.checkNavigation!(url);
      if (refusal && !client.closed && !this.#traps.intercepting(targetId)) {
        release = await this.#traps.set(targetId, url, refusal.reason);
      }
    } catch {
      // no trap: the egress refuses the connection anyway, with its own answer
    }
    if (client.closed) release?.();
    else this.#sendFor(client, command, wireSession, undefined, release);
    this.#release(client, wireSession);
  }

  /** A command of the mux itself, on `sessionId` (or the browser's root session). */
  #command(method: string, params: CdpParams, sessionId?: string): Promise<Parsed> {
    return new Promise((resolve, reject) => {
      this.#send({ id: 0, method, params }, sessionId, {
        settle: (reply) => {
          try {
            if (reply.ok) return resolve(reply.parse());
          } catch {
            /* malformed: refused below */
          }
          reject(new Error(`${method} failed`));
        },
      });
    });
  }

  // -- incoming ----------------------------------------------------------------------------

  /**
   * A message from the pipe. Chromium writes only JSON objects, but any process of the instance
   * may write into a copy of the pipe: a message that breaks what the routing (or the server's
   * own connection) expects fails the pipe rather than the server.
   */
  #receive(data: Buffer): void {
    try {
      const msg = incoming(data);
      if (msg.id !== undefined) this.#reply(msg);
      else this.#event(msg, data);
    } catch (err) {
      this.#pipe.fail(`a malformed DevTools message (${(err as Error).message})`);
    }
  }

  #reply(msg: Incoming): void {
    const p = this.#pending.get(msg.id!);
    if (!p) return; // its sender is gone
    this.#pending.delete(msg.id!);
    if (p.client) p.client.inFlight--;
    if (p.settle) return p.settle(msg);
    p.after?.();
    if (p.activates !== undefined && msg.ok) this.#opts.onActivate?.(p.activates);
    const { client } = p;
    if (!client) {
      const reply = msg.rewrite(p.id, false);
      if (reply.length <= CDP_MAX_ROOT_REPLY_BYTES) return this.#toRoot(reply);
      const why = `a reply of ${reply.length} bytes (the server reads at most ${CDP_MAX_ROOT_REPLY_BYTES})`;
      return this.#toRoot(errorReply(p.id, -32000, why));
    }
    if (p.adopt && msg.ok) {
      const sessionId = msg.parse().result?.sessionId;
      if (typeof sessionId === 'string') this.#own(client, sessionId, p.adopt.targetId);
    }
    if (p.createsContext && msg.ok) {
      const contextId = msg.parse().result?.browserContextId;
      if (typeof contextId === 'string') this.#opts.onContextCreated?.(contextId);
    }
    this.#deliver(client, msg.rewrite(p.id, msg.sessionId === client.session));
  }

  #event(msg: Incoming, data: Buffer): void {
    if (msg.method === 'Target.attachedToTarget' || msg.method === 'Target.detachedFromTarget') {
      this.#ownership(msg);
    }
    const { sessionId } = msg;
    if (sessionId !== undefined && this.#traps.event(sessionId, msg)) return;
    const client = sessionId !== undefined ? this.#sessions.get(sessionId) : undefined;
    if (client) {
      this.#deliver(client, sessionId === client.session ? msg.rewrite(undefined, true) : data);
    } else if (sessionId === undefined || !this.#retired.has(sessionId)) {
      // none of the server's own listeners needs a larger event: not decoded, dropped
      if (data.length <= CDP_MAX_ROOT_EVENT_BYTES) this.#toRoot(data);
    }
  }

  #ownership(msg: Incoming): void {
    const { method, params } = msg.parse();
    const child = params?.sessionId;
    if (typeof child !== 'string') return;
    if (method === 'Target.attachedToTarget') {
      const client = msg.sessionId !== undefined ? this.#sessions.get(msg.sessionId) : undefined;
      const info = params?.targetInfo as { targetId?: unknown } | undefined;
      const targetId = typeof info?.targetId === 'string' ? info.targetId : undefined;
      if (client) this.#own(client, child, targetId);
      return;
    }
    const client = this.#sessions.get(child);
    if (!client) return;
    if (child === client.session) {
      this.#drop(client, false); // Chromium ended it: its page closed
      client.peer?.close();
    } else {
      client.owned.delete(child);
      this.#sessions.delete(child);
      this.#traps.forget(child);
    }
  }

  #own(client: Client, sessionId: string, targetId: string | undefined): void {
    if (client.closed) return;
    client.owned.set(sessionId, targetId);
    this.#sessions.set(sessionId, client);
  }

  #toRoot(data: Buffer): void {
    this.#rootReader?.message(data.toString());
  }
}
