/**
 * Decoding one kernel-bridge reply line (pool.ts). The line is the instance's to write (any of
 * its processes may hold the bridge's stdout), so decoding it can cost what the instance wants
 * within the bounds: `display({"application/json": [{}] * 950000}, raw=True)` is 2.85 MB that
 * took 0.5–0.8 s to decode and encode again on the main thread (attack5 A2). Long lines are
 * therefore decoded in the kernel-reply thread (reply-thread.ts); what comes back is small
 * values and an execution's outputs as JSON bytes, which the answer and the notebook file take
 * as they are (index.ts, notebooks.ts), so the main thread never holds them decoded.
 */
import { parseBounded } from '../../../internal/json-bounded.js';

/**
 * Objects and arrays one reply may hold: a notebook cell's plots and tables fit many times over;
 * `[{},{},…]` that would take gigabytes of heap does not. Checked where the line is decoded.
 */
export const MAX_REPLY_CONTAINERS = 1_000_000;
/**
 * Objects and arrays of a reply's part besides an execution's outputs (its status, streams,
 * error and traceback, or a list of kernelspecs), which the main thread receives decoded.
 */
export const MAX_SMALL_CONTAINERS = 10_000;

/** A reply line, decoded; `outputs` (an execution's) stays JSON. */
export interface DecodedReply {
  id: number;
  ok: boolean;
  /** The result without `outputs`. */
  result?: unknown;
  /** An execution's `outputs` array as JSON (UTF-8), when the result had one. */
  outputs?: Uint8Array;
  error?: { code: string; message: string };
}

/** A line that breaks the protocol: too costly to decode, not JSON, not a reply. */
export class BadReply extends Error {
  override name = 'BadReply';
}

/** The reply `line` holds; `BadReply` when it is not one the server takes. */
export function decodeReply(line: string): DecodedReply {
  let msg: { id?: unknown; ok?: unknown; result?: unknown; error?: unknown };
  try {
    msg = parseBounded(line, MAX_REPLY_CONTAINERS) as typeof msg;
  } catch (err) {
    throw new BadReply((err as Error).message);
  }
  if (typeof msg !== 'object' || msg === null || typeof msg.id !== 'number') {
    throw new BadReply('a reply without a numeric id');
  }
  if (msg.ok !== true) {
    const e = (msg.error ?? {}) as { code?: unknown; message?: unknown };
    const error = { code: String(e.code ?? 'internal'), message: String(e.message ?? '') };
    return { id: msg.id, ok: false, error };
  }
  let result = msg.result;
  let outputs: Uint8Array | undefined;
  if (typeof result === 'object' && result !== null && 'outputs' in result) {
    const { outputs: list, ...rest } = result as { outputs: unknown };
    outputs = new TextEncoder().encode(JSON.stringify(Array.isArray(list) ? list : []));
    result = rest;
  }
  if (containersOverIn(result, MAX_SMALL_CONTAINERS)) {
    throw new BadReply(
      `more than ${MAX_SMALL_CONTAINERS} objects and arrays besides the outputs of a reply`,
    );
  }
  return { id: msg.id, ok: true, result, ...(outputs ? { outputs } : {}) };
}

/** Whether the decoded `value` holds more than `max` objects and arrays (strings not counted). */
function containersOverIn(value: unknown, max: number): boolean {
  const stack = [value];
  let count = 0;
  while (stack.length > 0) {
    const item = stack.pop();
    if (typeof item !== 'object' || item === null) continue;
    if (++count > max) return true;
    stack.push(...(Array.isArray(item) ? item : Object.values(item)));
  }
  return false;
}
