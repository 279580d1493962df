/**
 * The HTTP side of a cluster node, as one plug-in of the app (../app.ts registers it only on a
 * node): forwarding to the node that owns an instance (forward.ts), the placement of starts
 * (../start-placement.ts), keys of projects (keys.ts) and the count of refused starts
 * (../../cluster/refusals.ts). A single server has none of it and reads as if it did not exist.
 *
 * Most of it is one Fastify plugin (`register`), not encapsulated (`skip-override`, as
 * fastify-plugin does), so its hooks run for every route of the app, after the app's own
 * `onRequest` hooks (the connection cap, the API key):
 *
 * - `onRequest`: a start this node answers 429 or 503 is counted (a start forwarded here is
 *   counted by the node that answers the client); then a request for another node's instance
 *   is forwarded (forward.ts), before its body is read;
 * - `preHandler`: the handler runs as the key's principal (keys.ts); then a start's body says
 *   where it goes (placement);
 * - `onClose`: the forwarder's and placement's connections close with the app.
 *
 * What is not a hook the app asks of the plug-in at its seams: a project's key at the API-key
 * check (`keys`), the handlers as a project sees them (`keys.wrap`), the client a forwarded
 * request carries (`forwardedClient`, for the per-client cap), the MCP tools' placement and
 * routes (`mcp`), and WebSocket upgrades for other nodes' instances (`upgrade`).
 */
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import type { AuthStore } from '../../auth-states/store.js';
import type { ClusterHttpParts } from '../../cluster/compose.js';
import type { McpCluster } from '../mcp.js';
import { StartPlacement } from '../start-placement.js';
import { FORWARDED_BY, Forwarder } from './forward.js';
import { KeyScope } from './keys.js';

/** An upgrade this node answers itself (the app's WebSocket routes). */
type LocalUpgrade = (req: IncomingMessage, socket: Duplex, head: Buffer) => void;

export class ClusterPlugin {
  /** Keys of projects, and what each may see (keys.ts). */
  readonly keys: KeyScope;
  readonly #parts: ClusterHttpParts;
  readonly #forwarder: Forwarder;
  readonly #placement: StartPlacement;

  /** `draining`: whether this node drains now (its Health): placement then leaves it out. */
  constructor(parts: ClusterHttpParts, app: { authStore: AuthStore; draining: () => boolean }) {
    const { node } = parts;
    this.#parts = parts;
    this.keys = new KeyScope(parts.keys, app.authStore);
    this.#forwarder = new Forwarder(node, node.clientSigner);
    this.#placement = new StartPlacement({
      name: node.name,
      db: node.db,
      view: parts.view,
      local: parts.local,
      signer: node.clientSigner,
      clusterMax: parts.clusterMax,
      // a drain leaves this node out of its own placements at once, before the database says so
      draining: app.draining,
    });
  }

  /** The client a request forwarded by another node proves it carries (../limits.ts). */
  readonly forwardedClient = (req: IncomingMessage): string | undefined =>
    this.#parts.node.clientSigner.clientOf(req);

  /** A start this node answered 429 or 503 (counted for the autoscaler). */
  readonly #refused = (status: number): void => this.#parts.refusals.count(status);

  /** What the MCP tools of a node need: starts placed, other nodes' instances reached (../mcp.ts). */
  get mcp(): McpCluster {
    return {
      placement: this.#placement,
      route: (id: string) => this.#forwarder.route(id),
      refused: this.#refused,
    };
  }

  /** A WebSocket upgrade: this node's instances go to `local`, another node's are joined to it. */
  upgrade(req: IncomingMessage, socket: Duplex, head: Buffer, local: LocalUpgrade): void {
    this.#forwarder.upgrade(req, socket, head, local);
  }

  /** The Fastify plugin: the hooks above, for every route of the app. */
  readonly register = Object.assign(
    async (app: FastifyInstance): Promise<void> => {
      const refused = this.#refused;
      app.addHook('onRequest', async (req, reply) => {
        if (req.method !== 'POST' || req.url.split('?', 1)[0] !== '/v1/start') return;
        if (req.headers[FORWARDED_BY] !== undefined) return;
        reply.raw.once('finish', () => refused(reply.raw.statusCode));
      });
      app.addHook('onRequest', this.#forwarder.hook);
      app.addHook('preHandler', this.keys.bind);
      // after the body is read: a start's body says where it can go
      app.addHook('preHandler', this.#placement.hook);
      app.addHook('onClose', async () => {
        await this.#forwarder.close();
        await this.#placement.close();
      });
    },
    { [Symbol.for('skip-override')]: true },
  );
}
