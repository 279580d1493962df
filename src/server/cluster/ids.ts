/**
 * Self-routing instance ids. A cluster id carries the slot of the node that owns the instance
 * and a tag, an HMAC-SHA256 under the cluster's secret over the rest of the id, so that any
 * node reads the owner from the id alone and refuses a forged or foreign id (another cluster's,
 * an edited slot) without asking the database:
 *
 *     inst_c 3a7 4f0c9d2e8b1a6f35 91e0c4b2d7a85f13
 *            │   │                └ tag: 64 bits of HMAC(secret, "inst_c" + slot + random)
 *            │   └ random: 64 bits
 *            └ slot: 3 hex digits (nodes.ts)
 *
 * Ids of a single-node server (`inst_` + 16 hex digits) stay valid: they belong to the node that
 * answers for them.
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { MAX_SLOT } from './nodes.js';

const CLUSTER_ID = /^inst_c([0-9a-f]{3})([0-9a-f]{16})([0-9a-f]{16})$/;
const SINGLE_NODE_ID = /^inst_[0-9a-f]{16}$/;

/** The cluster's secret, at least 32 bytes. */
export class IdSigner {
  readonly #secret: Buffer;

  constructor(secret: Buffer) {
    if (secret.length < 32) throw new Error('the cluster secret must be at least 32 bytes');
    this.#secret = Buffer.from(secret);
  }

  /** A new id owned by the node of `slot`. */
  mint(slot: number): string {
    if (!Number.isInteger(slot) || slot < 1 || slot > MAX_SLOT)
      throw new Error(`not a node slot: ${slot}`);
    const body = `inst_c${slot.toString(16).padStart(3, '0')}${randomBytes(8).toString('hex')}`;
    return body + this.#tag(body).toString('hex');
  }

  /**
   * Who owns `id`: `{ slot }` for a genuine cluster id, `'local'` for a single-node id (this
   * node's own), `undefined` for anything else (forged, another cluster's, malformed).
   */
  owner(id: string): { slot: number } | 'local' | undefined {
    if (SINGLE_NODE_ID.test(id)) return 'local';
    const m = CLUSTER_ID.exec(id);
    if (!m) return undefined;
    const body = id.slice(0, id.length - 16);
    const given = Buffer.from(m[3]!, 'hex');
    if (!timingSafeEqual(given, this.#tag(body))) return undefined;
    const slot = parseInt(m[1]!, 16);
    return slot >= 1 ? { slot } : undefined;
  }

  #tag(body: string): Buffer {
    return createHmac('sha256', this.#secret).update(body).digest().subarray(0, 8);
  }
}
