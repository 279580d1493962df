/**
 * Cluster mode: `POST /v1/start` and the MCP tool `instance_start` on any node start the
 * instance where placement says (../cluster/placement.ts). This node's own choice goes on to
 * the start handler here; another node's gets the start in one hop, and its answer (the
 * instance, or its error) goes back to the client as it came. Both callers go through `place`:
 * one choice, one retry rule, one 429.
 *
 * - **One hop.** The forwarded start carries `x-burrow-forwarded-by`; the node receiving it
 *   starts locally and never places again (forward.ts's rule for instance requests too). It
 *   carries the caller's API key, so that node checks it and gives the instance to the key's
 *   project as a start made there would.
 * - **A pin is not a pass.** Anyone can send that header: a client does, to keep a start on the
 *   node it chose. Only a forward that also carries the signed client address
 *   (../cluster/forwarded-client.ts) was placed by a node, under the cluster's cap; a start
 *   pinned by a client is held to that cap here (the node's own cap and a drain refuse it
 *   anyway, in the registry).
 * - **A race lost.** Two nodes may choose the same node's last slot at once: the loser hears
 *   its 429, and the start is placed once more without that node (and without one that did not
 *   answer). A second refusal is the cluster's 429.
 * - **A full cluster** answers `cluster_at_capacity` (429) with a `Retry-After` computed from
 *   its instances' deadlines and recent ends (`retryAfterSeconds`); an MCP tool reads the same
 *   message and seconds in its error.
 * - **A draining node** leaves itself out at once: its own row is made of its own state
 *   (`draining`), not of the database's copy, which it reads back only after the NOTIFY.
 * - **Profiles and extensions** are the cluster's (../cluster/profile-backend.ts,
 *   ../cluster/extension-backend.ts): a start naming them is placed like any other, and the
 *   node chosen fetches what it lacks. A body that does not validate stays here, for the start
 *   handler's 422.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import { pipeline } from 'node:stream/promises';
import { Agent, request, type Dispatcher } from 'undici';
import { operations, type Instance, type StartRequest } from '../../api/index.js';
import type { Database } from '../cluster/database.js';
import type { NodeAdvert } from '../cluster/nodes.js';
import {
  choose,
  clusterLive,
  readClusterLoad,
  retryAfterSeconds,
  type ClusterView,
  type NodeLoad,
} from '../cluster/placement.js';
import {
  formatMessage,
  HttpError,
  SERVER_ERRORS,
  serverError,
  type ServerErrorCode,
} from '../errors.js';
import { CLIENT_HEADER, type ClientSigner } from '../cluster/forwarded-client.js';
import { warmServes } from '../instances/plan.js';
import { FORWARDED_BY, forwardHeaders } from './cluster/forward.js';
import { parseInput, parseJsonBody } from './request-body.js';

export interface StartPlacementOptions {
  /** This node's name. */
  name: string;
  /** Where the Retry-After's load is read (instance rows). */
  db: Pick<Database, 'query'>;
  /** The other nodes' adverts (placement.ts). */
  view: Pick<ClusterView, 'nodes' | 'close'>;
  /** This node's own numbers, read now (its registry's, not its advert's). */
  local: () => Omit<NodeAdvert, 'url'>;
  /** Signs the client's address for the node a start goes to (../cluster/forwarded-client.ts). */
  signer?: ClientSigner | undefined;
  /** The cluster-wide cap of live instances, if any. */
  clusterMax?: number | undefined;
  /** Nodes sampled per placement; default 2. */
  k?: number;
  /** Whether this node is draining now (its Health): it then places every start elsewhere. */
  draining?: () => boolean;
}

/**
 * Who a request sent for an MCP session is made for: its start, or a call for another node's
 * instance (the HTTP hook reads the same off the request it forwards).
 */
export interface StartCaller {
  /** The caller's API key: the node receiving the start checks it and scopes the instance. */
  apiKey: string;
  /** The client's address, signed for the node that starts it (its per-client cap). */
  client: string | undefined;
}

/** Times a start is placed at most: the first choice, and once more after a refusal. */
const ATTEMPTS = 2;

export class StartPlacement {
  readonly #opts: StartPlacementOptions;
  readonly #agent = new Agent({ keepAliveTimeout: 30_000, connections: 16 });

  constructor(opts: StartPlacementOptions) {
    this.#opts = opts;
  }

  /** The nodes as placement sees them: the view, with this node's row made of its own numbers. */
  nodes(): NodeLoad[] {
    const { name } = this.#opts;
    const others = this.#opts.view.nodes();
    const mine = others.find((n) => n.name === name);
    const local = this.#opts.local();
    const self: NodeLoad = {
      name,
      url: mine?.url ?? '',
      capacity: local.capacity,
      freeSlots: local.freeSlots,
      warm: local.warm,
      // this node's own drain counts at once; another's is read from the database with the view
      state: this.#opts.draining?.() ? 'draining' : (mine?.state ?? 'up'),
      leased: true,
    };
    return [self, ...others.filter((n) => n !== mine)];
  }

  /**
   * Place a start: undefined when this node starts it (its own choice, or a start bound to this
   * node), else what `send` made of the chosen node's answer. `send` answers undefined when that
   * node refused for lack of room or did not answer: the start is placed once more without it.
   * Throws the 429 of a full cluster.
   */
  async place<T>(
    body: StartRequest,
    send: (node: NodeLoad) => Promise<T | undefined>,
  ): Promise<T | undefined> {
    const type = body.instance_type ?? 'ubuntu';
    if (type !== 'browser' && type !== 'ubuntu') return undefined; // no node runs it: refused here
    // what Registry.start takes from a warm pool: the one table of it (instances/plan.ts)
    const warmEligible = warmServes(body);
    const exclude = new Set<string>();
    for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
      const nodes = this.nodes();
      const choice = choose(nodes, {
        type,
        warmEligible,
        self: this.#opts.name,
        exclude,
        clusterMax: this.#opts.clusterMax,
        ...(this.#opts.k !== undefined && { k: this.#opts.k }),
      });
      if (!choice) throw await this.#full(nodes);
      if (choice.node.name === this.#opts.name) return undefined; // started here
      const answered = await send(choice.node);
      if (answered !== undefined) return answered;
      exclude.add(choice.node.name);
    }
    throw await this.#full(this.nodes());
  }

  /** A `preHandler` hook of the app: places `POST /v1/start`, else does nothing. */
  hook = async (req: FastifyRequest, reply: FastifyReply): Promise<FastifyReply | undefined> => {
    // the route matched, not the URL's text: no other spelling of the path skips placement
    if (req.method !== 'POST' || req.routeOptions.url !== '/v1/start') return undefined;
    if (req.headers[FORWARDED_BY] !== undefined) {
      // a node's forward was placed by the sender, under the cluster's cap; a client's own mark
      // (a start pinned to the node it chose) proves nothing, so the cap is this node's to keep
      const signed = this.#opts.signer?.clientOf(req.raw) !== undefined;
      const max = this.#opts.clusterMax;
      if (!signed && max !== undefined) {
        const nodes = this.nodes();
        if (clusterLive(nodes) >= max) throw await this.#full(nodes);
      }
      return undefined;
    }
    let body;
    try {
      body = parseInput(operations.start.body, parseJsonBody(req.body), 'body');
    } catch {
      return undefined; // the start handler answers the 422
    }
    const sent = await this.place(body, async (node) =>
      (await this.#forward(req, reply, node)) ? true : undefined,
    );
    return sent ? reply : undefined;
  };

  /**
   * The MCP tool's start: the instance another node started for `caller`, or undefined when
   * this node is to start it (the tool then calls its own start handler). Another node's error
   * is thrown as the HttpError it answered (same code, message, status and Retry-After).
   */
  start(body: StartRequest, caller: StartCaller): Promise<Instance | undefined> {
    return this.place(body, (node) => this.#send(node, body, caller));
  }

  /**
   * A request made for `caller` (its key; its address, signed) to `target`: another node's API,
   * marked as this node's hop so that node answers it itself, or (`hop: false`) this node's own,
   * which forwards it as a client's request. The MCP tools' calls for other nodes' instances go
   * this way too (mcp.ts).
   */
  sendFor(
    caller: StartCaller,
    target: URL,
    method: Dispatcher.HttpMethod,
    json: unknown,
    hop = true,
  ): Promise<Dispatcher.ResponseData> {
    const headers: Record<string, string> = { 'x-api-key': caller.apiKey };
    if (json !== undefined) headers['content-type'] = 'application/json';
    if (hop) {
      headers[FORWARDED_BY] = this.#opts.name;
      if (caller.client) {
        headers['x-forwarded-for'] = caller.client;
        if (this.#opts.signer) {
          const path = target.pathname + target.search;
          headers[CLIENT_HEADER] = this.#opts.signer.sign(caller.client, method, path);
        }
      }
    }
    return request(target, {
      method,
      headers,
      ...(json !== undefined && { body: JSON.stringify(json) }),
      dispatcher: this.#agent,
      headersTimeout: 0, // a start answers when its instance is up, a bash command when done
      bodyTimeout: 0,
    });
  }

  /** `body` as a start sent to `node` for `caller`; undefined when it refused (429) or did not answer. */
  async #send(
    node: NodeLoad,
    body: StartRequest,
    caller: StartCaller,
  ): Promise<Instance | undefined> {
    let answer;
    try {
      answer = await this.sendFor(caller, new URL('/v1/start', node.url), 'POST', body);
    } catch {
      return undefined;
    }
    if (answer.statusCode === 429) {
      await answer.body.dump();
      return undefined;
    }
    const text = await answer.body.text();
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      json = { detail: text };
    }
    if (answer.statusCode < 300) return json as Instance;
    const detail = (json as { detail?: unknown }).detail;
    const code = answer.headers['x-burrow-error'];
    const retryAfter = answer.headers['retry-after'];
    throw new HttpError(
      (typeof code === 'string' ? code : 'internal_error') as ServerErrorCode,
      typeof detail === 'string' ? detail : JSON.stringify(detail ?? text),
      answer.statusCode as HttpError['status'],
      typeof retryAfter === 'string' ? { 'Retry-After': retryAfter } : {},
    );
  }

  /**
   * Send the start to `node`; true once its answer went to the client, false when it refused
   * for lack of room (429) or did not answer, so another node may be tried.
   */
  async #forward(req: FastifyRequest, reply: FastifyReply, node: NodeLoad): Promise<boolean> {
    const headers = forwardHeaders(req.raw, this.#opts.name, req.url, this.#opts.signer);
    delete headers['content-length']; // the body is sent as this node read it
    let answer;
    try {
      // the path as it came (forward.ts says why it is never resolved)
      answer = await this.#agent.request({
        origin: new URL(node.url).origin,
        path: req.url,
        method: 'POST',
        headers,
        body: typeof req.body === 'string' ? req.body : '',
        headersTimeout: 0, // a start answers when its instance is up
        bodyTimeout: 0,
      });
    } catch {
      return false;
    }
    if (answer.statusCode === 429) {
      await answer.body.dump();
      return false;
    }
    reply.hijack();
    const res = reply.raw;
    const out: Record<string, string | string[]> = {};
    for (const [k, v] of Object.entries(answer.headers)) {
      if (v === undefined || k === 'connection' || k === 'keep-alive') continue;
      if (k === 'transfer-encoding') continue;
      out[k] = v;
    }
    res.writeHead(answer.statusCode, out);
    try {
      await pipeline(answer.body, res);
    } catch {
      res.destroy(); // the client or the node went away mid-answer
    }
    return true;
  }

  /** The 429 of a full cluster, its Retry-After computed from the load (placement.ts). */
  async #full(nodes: readonly NodeLoad[]): Promise<HttpError> {
    const live = clusterLive(nodes);
    const max = this.#opts.clusterMax;
    const counted = nodes.filter((n) => n.leased && n.state !== 'left');
    const capacity = counted.reduce((sum, n) => sum + n.capacity, 0);
    const limit = max === undefined ? capacity : Math.min(max, capacity);
    let load;
    try {
      load = await readClusterLoad(this.#opts.db, Math.max(1, live - limit + 1));
    } catch (err) {
      return serverError('cluster_database_unavailable', { reason: (err as Error).message });
    }
    const seconds = retryAfterSeconds(load);
    const detail = formatMessage(SERVER_ERRORS.cluster_at_capacity.message, {
      live,
      nodes: counted.length,
      limit,
      seconds,
    });
    return new HttpError('cluster_at_capacity', detail, 429, { 'Retry-After': String(seconds) });
  }

  close(): Promise<void> {
    this.#opts.view.close();
    return this.#agent.close();
  }
}
