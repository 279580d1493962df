/**
 * The X11 wire format, as far as burrow's X client needs it: connection setup (optionally with
 * MIT-MAGIC-COOKIE-1 from an Xauthority file), message framing, and the requests GetImage,
 * GetInputFocus, GetKeyboardMapping and ChangeKeyboardMapping. Pure functions over bytes, all
 * little-endian (the client announces `l` at setup); the socket is in x11.ts.
 */

export interface PixelFormat {
  depth: number;
  bitsPerPixel: number;
  scanlinePad: number;
}

/** What the client keeps of the setup reply: the first screen and the keycode range. */
export interface ScreenInfo {
  root: number;
  width: number;
  height: number;
  depth: number;
  format: PixelFormat;
  /** Channel masks of the root visual. */
  masks: { red: number; green: number; blue: number };
  minKeycode: number;
  maxKeycode: number;
}

export const AUTH_NAME = 'MIT-MAGIC-COOKIE-1';

const pad4 = (b: Buffer) =>
  b.length % 4 === 0 ? b : Buffer.concat([b, Buffer.alloc(4 - (b.length % 4))]);

/** The connection setup request (protocol 11.0), with the cookie if there is one. */
export function setupRequest(cookie: Buffer | undefined): Buffer {
  const name = cookie ? Buffer.from(AUTH_NAME) : Buffer.alloc(0);
  const data = cookie ?? Buffer.alloc(0);
  const head = Buffer.alloc(12);
  head.write('l', 0, 'latin1'); // little-endian
  head.writeUInt16LE(11, 2);
  head.writeUInt16LE(0, 4);
  head.writeUInt16LE(name.length, 6);
  head.writeUInt16LE(data.length, 8);
  return Buffer.concat([head, pad4(name), pad4(data)]);
}

/** Total length of the setup reply whose first 8 bytes are `head`. */
export const setupReplyLength = (head: Buffer): number => 8 + head.readUInt16LE(6) * 4;

/**
 * The reason a complete setup reply gives for refusing the connection (status 0 Failed,
 * 2 Authenticate); `undefined` when it accepts it (status 1, see `parseSetup`).
 */
export function setupRefusal(msg: Buffer): string | undefined {
  if (msg[0] === 1) return undefined;
  const reason = msg.subarray(8, 8 + (msg[0] === 0 ? msg[1]! : msg.length - 8)).toString('latin1');
  return reason.replace(/\0+$/, '').trim();
}

/** The first screen of a successful setup reply. */
export function parseSetup(buf: Buffer): ScreenInfo {
  const vendorLen = buf.readUInt16LE(24);
  const screens = buf[28]!;
  const nFormats = buf[29]!;
  if (screens < 1) throw new Error('X server has no screens');
  let o = 40 + Math.ceil(vendorLen / 4) * 4;
  const formats: PixelFormat[] = [];
  for (let i = 0; i < nFormats; i++, o += 8) {
    formats.push({ depth: buf[o]!, bitsPerPixel: buf[o + 1]!, scanlinePad: buf[o + 2]! });
  }
  const root = buf.readUInt32LE(o);
  const width = buf.readUInt16LE(o + 20);
  const height = buf.readUInt16LE(o + 22);
  const rootVisual = buf.readUInt32LE(o + 32);
  const depth = buf[o + 38]!;
  const nDepths = buf[o + 39]!;
  o += 40;
  let masks: ScreenInfo['masks'] | undefined;
  for (let d = 0; d < nDepths; d++) {
    const nVisuals = buf.readUInt16LE(o + 2);
    o += 8;
    for (let v = 0; v < nVisuals; v++, o += 24) {
      if (buf.readUInt32LE(o) === rootVisual) {
        masks = {
          red: buf.readUInt32LE(o + 8),
          green: buf.readUInt32LE(o + 12),
          blue: buf.readUInt32LE(o + 16),
        };
      }
    }
  }
  const format = formats.find((f) => f.depth === depth);
  if (!format || !masks || ![16, 24, 32].includes(format.bitsPerPixel)) {
    throw new Error(`Unsupported X screen format (depth ${depth})`);
  }
  return { root, width, height, depth, format, masks, minKeycode: buf[34]!, maxKeycode: buf[35]! };
}

/**
 * Total length of the server message whose first 32 bytes are `head`: replies (type 1) carry
 * a length of extra 4-byte units; errors (0) and events are 32 bytes.
 */
export const messageLength = (head: Buffer): number =>
  head[0] === 1 ? 32 + head.readUInt32LE(4) * 4 : 32;

/** A complete server message after setup. */
export type ServerMessage =
  | { kind: 'reply'; seq: number; body: Buffer }
  | { kind: 'error'; seq: number; message: string }
  | { kind: 'event' };

export function decodeMessage(msg: Buffer): ServerMessage {
  const kind = msg[0]!;
  if (kind !== 0 && kind !== 1) return { kind: 'event' };
  const seq = msg.readUInt16LE(2);
  if (kind === 1) return { kind: 'reply', seq, body: msg };
  return { kind: 'error', seq, message: `X error ${msg[1]} (request opcode ${msg[10]})` };
}

/** Bytes of one row of ZPixmap data `w` pixels wide. */
export const stride = (f: PixelFormat, w: number): number =>
  Math.ceil((w * f.bitsPerPixel) / f.scanlinePad) * (f.scanlinePad / 8);

/** GetImage (opcode 73) of a rectangle of `drawable` in ZPixmap format, all planes. */
export function getImageRequest(
  drawable: number,
  x: number,
  y: number,
  w: number,
  h: number,
): Buffer {
  const req = Buffer.alloc(20);
  req[0] = 73; // GetImage
  req[1] = 2; // ZPixmap
  req.writeUInt16LE(5, 2);
  req.writeUInt32LE(drawable, 4);
  req.writeInt16LE(x, 8);
  req.writeInt16LE(y, 10);
  req.writeUInt16LE(w, 12);
  req.writeUInt16LE(h, 14);
  req.writeUInt32LE(0xffffffff, 16);
  return req;
}

/** The pixel data of a GetImage reply. */
export const imageData = (reply: Buffer): Buffer => reply.subarray(32);

/** GetInputFocus (opcode 43): a cheap round trip. */
export function getInputFocusRequest(): Buffer {
  const req = Buffer.alloc(4);
  req[0] = 43; // GetInputFocus
  req.writeUInt16LE(1, 2);
  return req;
}

/** GetKeyboardMapping (opcode 101) of `count` keycodes from `first`. */
export function getKeyboardMappingRequest(first: number, count: number): Buffer {
  const req = Buffer.alloc(8);
  req[0] = 101; // GetKeyboardMapping
  req.writeUInt16LE(2, 2);
  req[4] = first;
  req[5] = count;
  return req;
}

/** What a GetKeyboardMapping reply says about keysyms and free keycodes. */
export interface KeyboardMapping {
  /** Keysyms per keycode. */
  perKeycode: number;
  /** keysym → the lowest keycode that has it at any level. */
  bound: Map<number, number>;
  /** Keycodes with no keysym at all, lowest first. */
  spare: number[];
}

/** Reads the GetKeyboardMapping reply for `count` keycodes from `first`. */
export function parseKeyboardMapping(reply: Buffer, first: number, count: number): KeyboardMapping {
  const per = reply[1]!;
  const bound = new Map<number, number>();
  const spare: number[] = [];
  for (let k = 0; k < count; k++) {
    let empty = true;
    for (let i = 0; i < per; i++) {
      const sym = reply.readUInt32LE(32 + (k * per + i) * 4);
      if (sym === 0) continue;
      empty = false;
      if (!bound.has(sym)) bound.set(sym, first + k);
    }
    if (empty) spare.push(first + k);
  }
  return { perKeycode: per, bound, spare };
}

/**
 * ChangeKeyboardMapping (opcode 100) of one keycode to `keysym`, at level 1 and, when the
 * keycode has more than one level, level 2 (with Shift) too.
 */
export function changeKeyboardMappingRequest(keycode: number, per: number, keysym: number): Buffer {
  const req = Buffer.alloc(8 + per * 4);
  req[0] = 100; // ChangeKeyboardMapping
  req[1] = 1; // one keycode
  req.writeUInt16LE(2 + per, 2);
  req[4] = keycode;
  req[5] = per;
  req.writeUInt32LE(keysym, 8); // level 1
  if (per > 1) req.writeUInt32LE(keysym, 12); // level 2 (with Shift)
  return req;
}

/**
 * Keycodes for the keysyms of `wanted` that the keymap lacks: spare keycodes first (highest
 * first), then keycodes this client bound earlier (`ours`, keysym → keycode, oldest first)
 * that still hold what it bound there and are not wanted now. `undefined` when there are not
 * enough keycodes; an empty list when nothing is missing.
 */
export function assignKeycodes(
  mapping: KeyboardMapping,
  wanted: readonly number[],
  ours: ReadonlyMap<number, number>,
): { keysym: number; keycode: number }[] | undefined {
  const missing = [...new Set(wanted)].filter((sym) => !mapping.bound.has(sym));
  if (missing.length === 0) return [];
  const needed = new Set(wanted);
  const spare = [...mapping.spare];
  const recyclable = [...ours.entries()]
    .filter(([sym, code]) => !needed.has(sym) && mapping.bound.get(sym) === code)
    .map(([, code]) => code);
  const out: { keysym: number; keycode: number }[] = [];
  for (const keysym of missing) {
    const keycode = spare.pop() ?? recyclable.shift();
    if (keycode === undefined) return undefined;
    out.push({ keysym, keycode });
  }
  return out;
}

/**
 * The MIT-MAGIC-COOKIE-1 for display `number` in the contents of an Xauthority file: the
 * entry for that display number, else one for any display (empty number).
 */
export function parseXauthority(buf: Buffer, number: string): Buffer | undefined {
  let o = 0;
  const field = () => {
    const len = buf.readUInt16BE(o);
    const v = buf.subarray(o + 2, o + 2 + len);
    o += 2 + len;
    return v;
  };
  let fallback: Buffer | undefined;
  while (o + 2 <= buf.length) {
    o += 2; // family
    field(); // address
    const num = field().toString('latin1');
    const name = field().toString('latin1');
    const data = field();
    if (name !== AUTH_NAME) continue;
    if (num === number) return data;
    if (num === '') fallback ??= data;
  }
  return fallback;
}
