/**
 * DevTools messages as the multiplexer (mux.ts) sees them, in both directions.
 *
 * From Chromium: a message is routed on its first and last bytes. Chromium writes a reply as
 * `{"id":N,…` and appends `,"sessionId":"…"}` to messages of a session, so a reply needs only its
 * id replaced and an event of a client's own session only that tail cut, without decoding (a
 * screenshot is tens of MiB). Messages of any other shape are decoded (never seen from Chromium,
 * kept for safety), as are the few that change ownership, within `CDP_MAX_DECODED_BYTES`: any
 * process of the instance may write into a copy of the pipe.
 *
 * From a client: a command is decoded when small and located when large (command.ts).
 */
import { CDP_MAX_DECODED_BYTES } from '../../api/cdp-limits.js';
import type { CdpParams } from './transport.js';

/** A message from Chromium, located but not decoded. */
export interface Incoming {
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

/** A DevTools message decoded. */
export interface Parsed {
  id?: number;
  method?: string;
  params?: CdpParams;
  result?: CdpParams;
  error?: unknown;
  sessionId?: string;
}

const HEAD_BYTES = 128;
const TAIL_BYTES = 128;
const REPLY_HEAD = /^\{"id":(\d+),"(result|error)"/;
const EVENT_HEAD = /^\{"method":"([^"\\]+)",/;
const SESSION_TAIL = /,"sessionId":"([^"\\]+)"\}$/;
const CLOSE_BRACE = Buffer.from('}');

/**
 * A message from the pipe, located by its first and last bytes, else decoded. Throws for one
 * that is not a JSON object or is too long to decode: the pipe is then failed.
 */
export function incoming(data: Buffer): Incoming {
  return locate(data) ?? decoded(data);
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
      if (renumber && inPlace(data, id, idEnd)) {
        if (!cut) return data;
        data[bodyEnd] = 0x7d; // }
        return data.subarray(0, bodyEnd + 1);
      }
      const parts = [data.subarray(renumber ? idEnd : 0, cut ? bodyEnd : data.length)];
      if (renumber) parts.unshift(Buffer.from(`{"id":${id}`));
      if (cut) parts.push(CLOSE_BRACE);
      return Buffer.concat(parts);
    },
    parse: () => decode(data) as Parsed,
  };
}

/** Where a reply's id starts: after `{"id":`. */
const ID_START = 6;

/**
 * Writes the client's `id` over a reply's wire id in place, padded with spaces before the comma
 * (JSON allows them), when it has no more digits; false when it does not fit. A reply goes to one
 * client only, so its bytes are its own to change: a reply of tens of MiB (a screenshot, an
 * evaluation's value) is then passed on without being copied whole on the main thread, which
 * took 20–25 ms per 8 MiB here and most of a turn of the event loop.
 */
function inPlace(data: Buffer, id: number, idEnd: number): boolean {
  const digits = String(id);
  const room = idEnd - ID_START;
  if (digits.length > room) return false;
  data.write(digits.padEnd(room, ' '), ID_START, 'latin1');
  return true;
}

/** `data` decoded, refused past `CDP_MAX_DECODED_BYTES`. */
function decode(data: Buffer): unknown {
  if (data.length > CDP_MAX_DECODED_BYTES) {
    throw new Error(`${data.length} bytes to decode (at most ${CDP_MAX_DECODED_BYTES})`);
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
export const FAILED: Incoming = {
  ok: false,
  rewrite: () => Buffer.alloc(0),
  parse: () => ({}),
};

/** A DevTools error reply, as Chromium writes one (no id when the message had none). */
export function errorReply(id: number | undefined, code: number, message: string): Buffer {
  return Buffer.from(JSON.stringify({ ...(id !== undefined && { id }), error: { code, message } }));
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
