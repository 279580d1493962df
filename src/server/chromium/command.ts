/**
 * A `cdp_url` client's command as the multiplexer (mux.ts) reads it, on the server's main thread.
 *
 * A small command is decoded and checked as Chromium's DevTools server checks one, with
 * Chromium's own error replies, so that the mux writes anew exactly the fields it looked at. What
 * a command decodes into is bounded: at most `CDP_MAX_DECODED_BYTES` and
 * `MAX_CLIENT_CONTAINERS` objects and arrays (json-bounded.ts counts them without decoding).
 *
 * A command over `CDP_LOCATE_ABOVE_BYTES` (an evaluation with a big expression, `setInputFiles`
 * of a buffer: up to tens of MiB) is located instead, as Chromium's own messages are (wire.ts),
 * unless its method is one whose params the mux reads (`INSPECTED`, decoded up to
 * `CDP_MAX_DECODED_BYTES`, refused past it): on the shapes the client
 * libraries write, `{"id":N,"method":"M","params":{…}}` with `,"sessionId":"S"` before the last
 * brace (Playwright), or with `"id"` after the params (Puppeteer). Its params are passed on as
 * the bytes that came, after one linear pass that finds the brace closing them to be the last
 * byte before the tail: the params object cannot close early and smuggle a second `sessionId`
 * or `id` to the top level, so Chromium reads at the top level only the fields the mux wrote.
 * Decoding a crafted 90 MiB command took the server's main thread for seconds and gigabytes of
 * heap (issue 35); this pass allocates nothing, skips strings in native `indexOf` steps and
 * runs in slices shared with the rest of such work (internal/cpu-share.ts).
 */
import { CDP_LOCATE_ABOVE_BYTES, CDP_MAX_DECODED_BYTES } from '../../api/cdp-limits.js';
import { inSlices } from '../../internal/cpu-share.js';
import { containersOver } from '../../internal/json-bounded.js';
import type { CdpParams } from './transport.js';
import { errorReply } from './wire.js';

/** Objects and arrays a client command may decode into; a command with more is located. */
export const MAX_CLIENT_CONTAINERS = 20_000;
/** Nesting of a located command's params: Chromium's own parser refuses deeper (300). */
const MAX_DEPTH = 1000;

/** A client's command as the mux sends it on: its own id, method, params and session if named. */
export interface ClientCommand {
  id: number;
  method: string;
  /** The params decoded, for a command small enough; `{}` for a located one. */
  params: CdpParams;
  /** The params as the bytes that came (a JSON object), for a located command. */
  raw?: Buffer | undefined;
  sessionId?: unknown;
}

const HEAD_BYTES = 256;
const TAIL_BYTES = 256;
const HEAD = /^\{"id":(0|[1-9]\d{0,15}),"method":"([A-Za-z0-9._]{1,128})","params":/;
const SESSION_TAIL = /,"sessionId":"([A-Za-z0-9._:-]{1,128})"\}$/;
const METHOD_HEAD = /^\{"method":"([A-Za-z0-9._]{1,128})","params":/;
const ID_TAIL = /,"id":(0|[1-9]\d{0,15})(?:,"sessionId":"([A-Za-z0-9._:-]{1,128})")?\}$/;

/** The reply to a located command whose params are not one JSON object (`wholeObject`). */
export const NOT_ONE_OBJECT = "Message has property 'params' but it is not one JSON object";
/** The reply to a command too large to decode that is not of the located shape. */
const NOT_LOCATED =
  'burrow: a command over the size the relay decodes must be compact JSON as Playwright or Puppeteer write it: {"id":N,"method":"M","params":{…},"sessionId":"S"}';

/**
 * A client's message decoded and checked (small), or located (large: its `raw` params are still
 * to be checked with `wholeObject`), or the error reply for it.
 */
export function clientCommand(data: Buffer): ClientCommand | { refused: Buffer } {
  const large = data.length > CDP_LOCATE_ABOVE_BYTES ? located(data) : undefined;
  if (large && !INSPECTED.has(large.method)) return large;
  if (data.length <= CDP_MAX_DECODED_BYTES) {
    const text = data.toString();
    if (!containersOver(text, MAX_CLIENT_CONTAINERS)) return decoded(text);
  }
  const command = large ?? located(data);
  if (!command) return { refused: errorReply(idOf(data), -32600, NOT_LOCATED) };
  if (!INSPECTED.has(command.method)) return command;
  const why = `burrow: ${command.method} with params over ${CDP_MAX_DECODED_BYTES} bytes`;
  return { refused: errorReply(command.id, -32602, why) };
}

function decoded(text: string): ClientCommand | { refused: Buffer } {
  let msg: unknown;
  try {
    msg = JSON.parse(text);
  } catch {
    return { refused: errorReply(undefined, -32700, 'Message must be a valid JSON') };
  }
  if (!isObject(msg) || !Number.isSafeInteger(msg.id)) {
    return { refused: errorReply(undefined, -32600, "Message must have integer 'id' property") };
  }
  const id = msg.id as number;
  const { method, params = {}, sessionId } = msg;
  if (typeof method !== 'string') {
    return { refused: errorReply(id, -32600, "Message must have string 'method' property") };
  }
  if (!isObject(params)) {
    return {
      refused: errorReply(id, -32602, "Message has property 'params' but it is not an object"),
    };
  }
  return { id, method, params, sessionId };
}

/**
 * A command located by its first and last bytes, its params not yet checked (`wholeObject`);
 * undefined when it has another shape. Two shapes: Playwright's, `{"id":N,"method":"M",
 * "params":{…},"sessionId":"S"}`, and Puppeteer's, `{"method":"M","params":{…},"id":N,
 * "sessionId":"S"}`; `sessionId` optional in both.
 */
function located(data: Buffer): ClientCommand | undefined {
  const headText = data.toString('latin1', 0, Math.min(data.length, HEAD_BYTES));
  const tailText = data.toString('latin1', Math.max(0, data.length - TAIL_BYTES));
  let id: string | undefined;
  let method: string | undefined;
  let sessionId: string | undefined;
  let start = 0;
  let tailLength = 0;
  const head = HEAD.exec(headText);
  if (head) {
    const tail = SESSION_TAIL.exec(tailText) ?? (tailText.endsWith('}') ? ['}'] : null);
    if (!tail) return undefined;
    [, id, method] = head;
    [start, tailLength, sessionId] = [head[0].length, tail[0].length, tail[1]];
  } else {
    const methodHead = METHOD_HEAD.exec(headText);
    const tail = ID_TAIL.exec(tailText);
    if (!methodHead || !tail) return undefined;
    [, method] = methodHead;
    [, id, sessionId] = tail;
    [start, tailLength] = [methodHead[0].length, tail[0].length];
  }
  if (!Number.isSafeInteger(Number(id))) return undefined;
  const raw = data.subarray(start, data.length - tailLength);
  return { id: Number(id), method: method!, params: {}, raw, sessionId };
}

/**
 * Whether `raw` (a located command's params) is one JSON object: it opens there, and the brace
 * that closes it, with brackets matched and strings skipped, is its last byte. Tokens between
 * are not checked (Chromium refuses the whole message if they are not JSON); only where the
 * object ends matters. The pass runs in the main thread's shared slices (internal/cpu-share.ts):
 * a crafted 90 MiB of brackets or escaped quotes takes a second or two of CPU, and six of them at
 * once take no more of each turn of the event loop than one.
 */
export function wholeObject(raw: Buffer): Promise<boolean> {
  return inSlices(objectScan(raw));
}

/** Bytes between two points where the pass may be paused. */
const STEP_BYTES = 64 * 1024;

/** `wholeObject`'s pass, yielding every `STEP_BYTES` or so, inside a long string too. */
function* objectScan(data: Buffer): Generator<void, boolean> {
  const end = data.length;
  if (end < 2 || data[0] !== 0x7b /* { */) return false;
  /** The closing bracket each open level expects. */
  const closers: number[] = [];
  let next = STEP_BYTES;
  for (let i = 0; i < end; i++) {
    if (i >= next) {
      next = i + STEP_BYTES;
      yield;
    }
    const c = data[i];
    if (c === 0x22 /* " */) {
      // to the quote that closes the string: one not preceded by an odd run of backslashes
      for (;;) {
        i = data.indexOf(0x22, i + 1);
        if (i < 0) return false;
        let escapes = 0;
        while (data[i - 1 - escapes] === 0x5c /* \ */) escapes++;
        if (escapes % 2 === 0) break;
        if (i >= next) {
          next = i + STEP_BYTES; // a string of escaped quotes is as long a pass as brackets
          yield;
        }
      }
    } else if (c === 0x7b || c === 0x5b /* [ */) {
      if (closers.length >= MAX_DEPTH) return false;
      closers.push(c === 0x7b ? 0x7d : 0x5d);
    } else if (c === 0x7d /* } */ || c === 0x5d /* ] */) {
      if (closers.pop() !== c) return false;
      if (closers.length === 0) return i === end - 1;
    }
  }
  return false;
}

/** The id of a message that could not be located, when its head names one. */
function idOf(data: Buffer): number | undefined {
  const id = /^\{"id":(0|[1-9]\d{0,15})[,}]/.exec(data.toString('latin1', 0, 32))?.[1];
  return id !== undefined && Number.isSafeInteger(Number(id)) ? Number(id) : undefined;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * Methods whose params the mux (or its `rewrite`, downloads.ts) reads: a client's command of one
 * of them too large to decode is refused; none needs more than a few bytes.
 */
export const INSPECTED = new Set([
  'Target.activateTarget',
  'Target.attachToTarget',
  'Target.attachToBrowserTarget',
  'Target.createBrowserContext',
  'Target.exposeDevToolsProtocol',
  'Page.navigate',
  'Browser.setDownloadBehavior',
  'Page.setDownloadBehavior',
]);

/** A located command as written to Chromium: pieces for the pipe to write without joining. */
export function wireCommand(
  id: number,
  method: string,
  raw: Buffer,
  sessionId: string | undefined,
): Buffer[] {
  const head = `{"id":${id},"method":${JSON.stringify(method)},"params":`;
  const tail = sessionId === undefined ? '}' : `,"sessionId":${JSON.stringify(sessionId)}}`;
  return [Buffer.from(head), raw, Buffer.from(tail)];
}
