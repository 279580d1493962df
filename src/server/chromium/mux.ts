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
 * Messages from Chromium are routed on their first and last bytes: Chromium writes a reply as
 * `{"id":N,…` and appends `,"sessionId":"…"}` to messages of a session, so a reply needs only its
 * id replaced and an event of a client's own session only that tail cut, without decoding (a
 * screenshot is tens of MiB). Messages of any other shape are parsed (never seen from Chromium,
 * kept for safety), as are the few that change ownership. Commands from clients are parsed and
 * written anew: Chromium then reads exactly the fields that the ownership check saw.
 */
import { CdpMessageTooLarge, type CdpPipe } from './pipe.js';
import type { CdpCommand, CdpParams, CdpTransport, CdpTransportReader } from './transport.js';

/** Where a client's messages go: its WebSocket, in the relay. */
export interface MuxPeer {
  /** One message, a JSON text. */
  send(data: Buffer): void;
  /** Chromium ended the client's session, or the browser is gone. */
  close(): void;
}

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

/**
 * Why a browser context with a proxy of its own is refused: Chromium would send that context's
 * traffic to the named proxy itself, around the instance's egress (where `blocked_domains` and the
 * host-local refusals hold), and the DevTools protocol never carries the proxy's credentials. The
 * instance's own upstream (`proxy` at start) serves every context instead.
 */
export const CONTEXT_PROXY_REFUSED =
  "burrow: a browser context cannot have a proxy of its own (it would bypass the instance's egress); start the instance with the proxy instead: POST /v1/start { proxy }, openSession({ proxy })";

/** What a client attaches to: the browser, or one page target (`/devtools/page/<id>`). */
export type MuxTarget = { type: 'browser' } | { type: 'page'; targetId: string };

/** A message from Chromium, located but not decoded. */
interface Incoming {
  /** Wire id of a reply. */
  id?: number | undefined;
  /** Method of an event. */
  method?: string | undefined;
  sessionId?: string | undefined;
  /** A reply carrying `result` (not `error`). */
  ok: boolean;
  /** The message with `id` in place of the wire id and, if `strip`, without its sessionId. */
  rewrite(id: number | undefined, strip: boolean): Buffer;
  /** The message decoded (used for the few messages that change ownership). */
  parse(): Parsed;
}

interface Parsed {
  id?: number;
  method?: string;
  params?: CdpParams;
  result?: CdpParams;
  error?: unknown;
  sessionId?: string;
}

interface Client {
  /** The session the server attached for it; its commands without `sessionId` go there. */
  readonly session: string;
  /** Its target when it is a page connection. */
  readonly targetId: string | undefined;
  /** Sessions it owns besides its own, with their targets when known. */
  readonly owned: Map<string, string | undefined>;
  peer: MuxPeer | undefined;
  /** Messages that arrived before `connect`, and their length. */
  queue: Buffer[];
  queued: number;
  /** Its commands Chromium has not answered yet. */
  inFlight: number;
  /**
   * Sessions with a navigation being checked → the client's later messages on them, held so
   * that they keep their order (its other sessions go on); `heldBytes` counts them all.
   */
  readonly held: Map<string, Buffer[]>;
  heldBytes: number;
  closed: boolean;
}

/** A navigation being failed: the server's own session on its page, with `Fetch` enabled. */
interface Trap {
  /** `host:port` of the refused URL (`URL.host`): its document requests fail. */
  readonly host: string;
  readonly reason: string;
  release(): void;
}

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
}

/**
 * Commands one client may have unanswered at once (each costs the server a routing entry until
 * Chromium answers, which may be never: a promise awaited forever). Playwright keeps a few dozen.
 */
export const MAX_IN_FLIGHT = 10_000;
/** Bytes held for a client that is not connected yet; past them it is dropped. */
const MAX_QUEUED_BYTES = 64 * 1024 * 1024;
/** A navigation's trap outlives its `Page.navigate` by this long at most (no reply ever came). */
const TRAP_MS = 60_000;

/**
 * What the server decodes itself is bounded far below what it only passes on: a message is
 * routed without decoding whatever its size, but JSON decoded into objects takes many times its
 * length in memory, and a process of the instance can write anything into the pipe. Messages
 * that change ownership (`Target.attachedToTarget`, attach replies) are a few hundred bytes.
 */
export const MAX_DECODED_BYTES = 1024 * 1024;
/**
 * Events for the server's own connection (its screencasts' frames are the largest) and replies
 * to its own commands (screenshots, storage), past which an event is dropped and a reply turned
 * into an error, never decoded.
 */
export const MAX_ROOT_EVENT_BYTES = 16 * 1024 * 1024;
export const MAX_ROOT_REPLY_BYTES = 64 * 1024 * 1024;

/** Chromium parses `id` as a 32-bit integer. */
const MAX_WIRE_ID = 2 ** 31 - 1;
const HEAD_BYTES = 128;
const TAIL_BYTES = 128;
const REPLY_HEAD = /^\{"id":(\d+),"(result|error)"/;
const EVENT_HEAD = /^\{"method":"([^"\\]+)",/;
const SESSION_TAIL = /,"sessionId":"([^"\\]+)"\}$/;
const CLOSE_BRACE = Buffer.from('}');

export class CdpMux {
  readonly #pipe: CdpPipe;
  readonly #opts: CdpMuxOptions;
  readonly #pending = new Map<number, Pending>();
  /** Every session of every client (their own and those they own) → the client. */
  readonly #sessions = new Map<string, Client>();
  readonly #clients = new Set<Client>();
  /** Sessions of departed clients, until Chromium has detached them: their events are dropped. */
  readonly #retired = new Set<string>();
  /** Sessions on which a client enabled `Fetch` → their targets (undefined: the browser's). */
  readonly #fetching = new Map<string, string | undefined>();
  /** The server's sessions failing a refused navigation. */
  readonly #traps = new Map<string, Trap>();
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
    pipe.listen({ message: (data) => this.#receive(data), close: () => this.close() });
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
          const client: Client = {
            session: sessionId,
            targetId: target.type === 'page' ? target.targetId : undefined,
            owned: new Map(),
            peer: undefined,
            queue: [],
            queued: 0,
            inFlight: 0,
            held: new Map(),
            heldBytes: 0,
            closed: false,
          };
          this.#clients.add(client);
          this.#sessions.set(sessionId, client);
          resolve({
            connect: (peer) => this.#connect(client, peer),
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
    for (const client of [...this.#clients]) {
      this.#drop(client, false);
      client.peer?.close();
    }
    for (const p of this.#pending.values()) p.settle?.(FAILED);
    this.#pending.clear();
    this.#pipe.close();
    this.#rootReader?.close();
  }

  #connect(client: Client, peer: MuxPeer): void {
    if (client.closed) return peer.close();
    client.peer = peer;
    const queue = client.queue;
    client.queue = [];
    client.queued = 0;
    for (const data of queue) peer.send(data);
  }

  #deliver(client: Client, data: Buffer): void {
    if (client.peer) return client.peer.send(data);
    client.queued += data.length;
    if (client.queued <= MAX_QUEUED_BYTES) return void client.queue.push(data);
    this.#drop(client, true); // never read: its peer is told when it connects
  }

  /** Forget a client; `detach` its session in Chromium too (unless Chromium ended it). */
  #drop(client: Client, detach: boolean): void {
    if (client.closed) return;
    client.closed = true;
    client.queue = [];
    client.queued = 0;
    client.held.clear();
    client.heldBytes = 0;
    this.#clients.delete(client);
    this.#sessions.delete(client.session);
    this.#fetching.delete(client.session);
    for (const sessionId of client.owned.keys()) {
      this.#sessions.delete(sessionId);
      this.#fetching.delete(sessionId);
    }
    // replies still on their way are dropped (wire ids count up: none is reused meanwhile)
    for (const [id, p] of this.#pending) if (p.client === client) this.#pending.delete(id);
    if (detach && this.#open) {
      // the sessions it owns are children of this one: Chromium ends them with it
      const sessions = [client.session, ...client.owned.keys()];
      for (const sessionId of sessions) this.#retired.add(sessionId);
      const params = { sessionId: client.session };
      this.#send({ id: 0, method: 'Target.detachFromTarget', params }, undefined, {
        settle: () => sessions.forEach((sessionId) => this.#retired.delete(sessionId)),
      });
    }
    if (this.#open) this.#opts.onClientClosed?.();
  }

  // -- outgoing ----------------------------------------------------------------------------

  #send(command: CdpCommand, sessionId: string | undefined, route: Omit<Pending, 'id'>): void {
    if (!this.#open) return;
    const { method, params } = command;
    const pending: Pending = { id: command.id, ...route };
    if (method === 'Target.activateTarget' && typeof params.targetId === 'string') {
      pending.activates = params.targetId;
    } else if (method === 'Page.bringToFront' && route.client && sessionId !== undefined) {
      pending.activates = this.#targetOf(route.client, sessionId);
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
    const text = JSON.stringify({ id, method, params, sessionId });
    this.#pipe.send(text); // throws, having written nothing, for one too long for Chromium
    this.#pending.set(id, pending);
    if (route.client) route.client.inFlight++;
  }

  #nextId(): number {
    do this.#lastId = this.#lastId >= MAX_WIRE_ID ? 1 : this.#lastId + 1;
    while (this.#pending.has(this.#lastId));
    return this.#lastId;
  }

  #targetOf(client: Client, sessionId: string): string | undefined {
    return sessionId === client.session ? client.targetId : client.owned.get(sessionId);
  }

  /** Go on with what a client sent on `session` while its navigation was checked, in order. */
  #release(client: Client, session: string): void {
    const waiting = client.held.get(session) ?? [];
    client.held.delete(session);
    while (waiting.length > 0 && !client.held.has(session) && !client.closed) {
      const data = waiting.shift()!;
      client.heldBytes -= data.length;
      this.#fromClient(client, data);
    }
    // another navigation on it is being checked: the rest waits for that one
    if (waiting.length > 0) client.held.get(session)?.push(...waiting);
  }

  /** A command from a client: checked, given a wire id and its session, written anew. */
  #fromClient(client: Client, data: Buffer): void {
    if (client.closed) return;
    let msg: unknown;
    try {
      msg = JSON.parse(data.toString());
    } catch {
      return this.#deliver(client, errorReply(undefined, -32700, 'Message must be a valid JSON'));
    }
    if (!isObject(msg) || !Number.isSafeInteger(msg.id)) {
      return this.#deliver(
        client,
        errorReply(undefined, -32600, "Message must have integer 'id' property"),
      );
    }
    const id = msg.id as number;
    const { method, params = {}, sessionId } = msg;
    if (typeof method !== 'string') {
      return this.#deliver(
        client,
        errorReply(id, -32600, "Message must have string 'method' property"),
      );
    }
    if (!isObject(params)) {
      return this.#deliver(
        client,
        errorReply(id, -32602, "Message has property 'params' but it is not an object"),
      );
    }
    if (method === 'Target.createBrowserContext' && params.proxyServer !== undefined) {
      return this.#deliver(client, errorReply(id, -32000, CONTEXT_PROXY_REFUSED));
    }
    let wireSession = client.session;
    if (sessionId !== undefined) {
      if (typeof sessionId !== 'string' || !client.owned.has(sessionId)) {
        return this.#deliver(client, errorReply(id, -32001, 'Session with given id not found.'));
      }
      wireSession = sessionId;
    }
    const held = client.held.get(wireSession);
    if (held) {
      held.push(data);
      client.heldBytes += data.length;
      if (client.heldBytes > MAX_QUEUED_BYTES) {
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
    const sent = this.#opts.rewrite ? this.#opts.rewrite(method, params) : params;
    if (method === 'Fetch.enable')
      this.#fetching.set(wireSession, this.#targetOf(client, wireSession));
    else if (method === 'Fetch.disable') this.#fetching.delete(wireSession);
    const targetId = this.#targetOf(client, wireSession);
    if (
      method === 'Page.navigate' &&
      this.#opts.checkNavigation &&
      typeof sent.url === 'string' &&
      targetId !== undefined
    ) {
      client.held.set(wireSession, []);
      void this.#navigate(client, { id, method, params: sent }, wireSession, targetId);
      return;
    }
    try {
      this.#send({ id, method, params: sent }, wireSession, { client });
    } catch (err) {
      if (!(err instanceof CdpMessageTooLarge)) throw err;
      this.#deliver(client, errorReply(id, -32000, err.message));
    }
  }

  /**
   * A client's `Page.navigate` to a URL the egress would refuse fails in Chromium itself, with
   * the `net::ERR_*` a local browser gives for that cause: the server attaches a session of its
   * own to the page, pauses its document requests (`Fetch`, only while this navigation is under
   * way) and fails the one to the refused host. Navigations it lets through are never paused.
   * A client that intercepts requests itself (`page.route`, `setRequestInterception`) keeps
   * them: its navigations get the proxy's refusal instead.
   */
  async #navigate(
    client: Client,
    command: CdpCommand,
    wireSession: string,
    targetId: string,
  ): Promise<void> {
    let trap: Trap | undefined;
    try {
      const url = command.params.url as string;
      const refusal = await this.#opts.checkNavigation!(url);
      if (refusal && !client.closed && !this.#intercepting(targetId)) {
        trap = await this.#trap(targetId, url, refusal.reason);
      }
    } catch {
      // no trap: the egress refuses the connection anyway, with its own answer
    }
    if (client.closed) trap?.release();
    else {
      try {
        this.#send(command, wireSession, { client, after: trap?.release });
      } catch (err) {
        trap?.release();
        if (!(err instanceof CdpMessageTooLarge)) throw err;
        this.#deliver(client, errorReply(command.id, -32000, err.message));
      }
    }
    this.#release(client, wireSession);
  }

  /** Whether a client intercepts requests of `targetId` (or of the whole browser). */
  #intercepting(targetId: string): boolean {
    for (const target of this.#fetching.values()) {
      if (target === undefined || target === targetId) return true;
    }
    return false;
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

  async #trap(targetId: string, url: string, reason: string): Promise<Trap> {
    const attached = await this.#command('Target.attachToTarget', { targetId, flatten: true });
    const sessionId = attached.result?.sessionId;
    if (typeof sessionId !== 'string') throw new Error('Target.attachToTarget failed');
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      clearTimeout(timer);
      this.#traps.delete(sessionId);
      this.#retired.add(sessionId);
      this.#send({ id: 0, method: 'Target.detachFromTarget', params: { sessionId } }, undefined, {
        settle: () => this.#retired.delete(sessionId),
      });
    };
    const timer = setTimeout(release, TRAP_MS);
    timer.unref();
    const trap: Trap = { host: new URL(url).host, reason, release };
    this.#traps.set(sessionId, trap);
    try {
      const patterns = [{ urlPattern: '*', resourceType: 'Document', requestStage: 'Request' }];
      await this.#command('Fetch.enable', { patterns }, sessionId);
    } catch (err) {
      release();
      throw err;
    }
    return trap;
  }

  /** An event of a trap's session: its paused document requests fail or go on. */
  #trapped(trap: Trap, sessionId: string, msg: Incoming): void {
    if (msg.method !== 'Fetch.requestPaused') return;
    let requestId: unknown;
    let host: string | undefined;
    try {
      const params = msg.parse().params;
      requestId = params?.requestId;
      const request = params?.request as { url?: unknown } | undefined;
      if (typeof request?.url === 'string') host = new URL(request.url).host;
    } catch {
      // too large to read: detaching lets every paused request go on
      return trap.release();
    }
    if (typeof requestId !== 'string') return trap.release();
    const [method, params]: [string, CdpParams] =
      host === trap.host
        ? ['Fetch.failRequest', { requestId, errorReason: trap.reason }]
        : ['Fetch.continueRequest', { requestId }];
    this.#send({ id: 0, method, params }, sessionId, { settle: () => {} });
  }

  // -- incoming ----------------------------------------------------------------------------

  /**
   * A message from the pipe. Chromium writes only JSON objects, but any process of the instance
   * may write into a copy of the pipe: a message that breaks what the routing (or the server's
   * own connection) expects fails the pipe rather than the server.
   */
  #receive(data: Buffer): void {
    try {
      const msg = locate(data) ?? decoded(data);
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
      if (reply.length <= MAX_ROOT_REPLY_BYTES) return this.#toRoot(reply);
      const why = `a reply of ${reply.length} bytes (the server reads at most ${MAX_ROOT_REPLY_BYTES})`;
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
    const trap = sessionId !== undefined ? this.#traps.get(sessionId) : undefined;
    if (trap) return this.#trapped(trap, sessionId!, msg);
    const client = sessionId !== undefined ? this.#sessions.get(sessionId) : undefined;
    if (client) {
      this.#deliver(client, sessionId === client.session ? msg.rewrite(undefined, true) : data);
    } else if (sessionId === undefined || !this.#retired.has(sessionId)) {
      // none of the server's own listeners needs a larger event: not decoded, dropped
      if (data.length <= MAX_ROOT_EVENT_BYTES) this.#toRoot(data);
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
      this.#fetching.delete(child);
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

/** Routes a message by its first and last bytes; undefined when it has another shape. */
function locate(data: Buffer): Incoming | undefined {
  const tail = data.toString('latin1', Math.max(0, data.length - TAIL_BYTES));
  const session = SESSION_TAIL.exec(tail);
  if (!session && !tail.endsWith('}}')) return undefined;
  const bodyEnd = data.length - (session ? session[0].length : 0);
  const sessionId = session?.[1];
  const head = data.toString('latin1', 0, Math.min(data.length, HEAD_BYTES));
  const reply = REPLY_HEAD.exec(head);
  const event = reply ? undefined : EVENT_HEAD.exec(head);
  if (!reply && !event) return undefined;
  /** Offset of the `,` after the id. */
  const idEnd = reply ? reply[0].length - reply[2]!.length - 3 : 0;
  return {
    id: reply ? Number(reply[1]) : undefined,
    method: event?.[1],
    sessionId,
    ok: reply?.[2] === 'result',
    rewrite: (id, strip) => {
      const cut = strip && session !== null;
      const renumber = id !== undefined && reply !== null;
      if (!renumber && !cut) return data;
      const parts = [data.subarray(renumber ? idEnd : 0, cut ? bodyEnd : data.length)];
      if (renumber) parts.unshift(Buffer.from(`{"id":${id}`));
      if (cut) parts.push(CLOSE_BRACE);
      return Buffer.concat(parts);
    },
    parse: () => decode(data) as Parsed,
  };
}

/** `data` decoded, refused past `MAX_DECODED_BYTES`. */
function decode(data: Buffer): unknown {
  if (data.length > MAX_DECODED_BYTES) {
    throw new Error(`${data.length} bytes to decode (at most ${MAX_DECODED_BYTES})`);
  }
  return JSON.parse(data.toString());
}

/** The general case: any JSON object, decoded and, when rewritten, encoded again. */
function decoded(data: Buffer): Incoming {
  const value = decode(data);
  if (!isObject(value)) throw new Error('not a JSON object');
  const msg = value as Parsed;
  const sessionId = typeof msg.sessionId === 'string' ? msg.sessionId : undefined;
  return {
    id: typeof msg.id === 'number' ? msg.id : undefined,
    method: typeof msg.method === 'string' ? msg.method : undefined,
    sessionId,
    ok: msg.result !== undefined,
    rewrite: (id, strip) => {
      const out: Parsed = { ...msg };
      if (id !== undefined) out.id = id;
      if (strip) delete out.sessionId;
      return Buffer.from(JSON.stringify(out));
    },
    parse: () => msg,
  };
}

/** The reply of a mux command when the browser went away first. */
const FAILED: Incoming = {
  ok: false,
  rewrite: () => Buffer.alloc(0),
  parse: () => ({}),
};

function errorReply(id: number | undefined, code: number, message: string): Buffer {
  return Buffer.from(JSON.stringify({ ...(id !== undefined && { id }), error: { code, message } }));
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
