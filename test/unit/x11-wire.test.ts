/** The X11 wire format of the ubuntu desktop's X client, on byte fixtures built here. */
import { describe, expect, it } from 'vitest';
import {
  assignKeycodes,
  changeKeyboardMappingRequest,
  decodeMessage,
  getImageRequest,
  getInputFocusRequest,
  getKeyboardMappingRequest,
  imageData,
  messageLength,
  parseKeyboardMapping,
  parseSetup,
  parseXauthority,
  setupRefusal,
  setupReplyLength,
  setupRequest,
  stride,
} from '../../src/server/ubuntu/desktop/x11-wire.js';

const pad4 = (b: Buffer) => Buffer.concat([b, Buffer.alloc((4 - (b.length % 4)) % 4)]);
const u16 = (v: number) => {
  const b = Buffer.alloc(2);
  b.writeUInt16LE(v);
  return b;
};
const u32 = (v: number) => {
  const b = Buffer.alloc(4);
  b.writeUInt32LE(v >>> 0);
  return b;
};

interface VisualFixture {
  id: number;
  masks: [number, number, number];
}

/** A successful setup reply with one screen, as an X server sends it (little-endian). */
function setupReply(opts: {
  vendor: string;
  formats: [depth: number, bpp: number, pad: number][];
  root: number;
  size: [number, number];
  rootVisual: number;
  rootDepth: number;
  depths: { depth: number; visuals: VisualFixture[] }[];
  keycodes: [number, number];
}): Buffer {
  const vendor = pad4(Buffer.from(opts.vendor, 'latin1'));
  const formats = opts.formats.map(([d, bpp, pad]) => Buffer.from([d, bpp, pad, 0, 0, 0, 0, 0]));
  const screen = Buffer.alloc(40);
  screen.writeUInt32LE(opts.root, 0);
  screen.writeUInt16LE(opts.size[0], 20);
  screen.writeUInt16LE(opts.size[1], 22);
  screen.writeUInt32LE(opts.rootVisual, 32);
  screen[38] = opts.rootDepth;
  screen[39] = opts.depths.length;
  const depths = opts.depths.flatMap(({ depth, visuals }) => [
    Buffer.concat([Buffer.from([depth, 0]), u16(visuals.length), Buffer.alloc(4)]),
    ...visuals.map((v) =>
      Buffer.concat([
        u32(v.id),
        Buffer.from([4, 8]), // TrueColor, bits per rgb
        u16(256),
        u32(v.masks[0]),
        u32(v.masks[1]),
        u32(v.masks[2]),
        Buffer.alloc(4),
      ]),
    ),
  ]);
  const body = Buffer.concat([vendor, ...formats, screen, ...depths]);
  const head = Buffer.alloc(40);
  head[0] = 1;
  head.writeUInt16LE(11, 2);
  head.writeUInt16LE((32 + body.length) / 4, 6);
  head.writeUInt16LE(opts.vendor.length, 24);
  head[28] = 1; // screens
  head[29] = opts.formats.length;
  head[34] = opts.keycodes[0];
  head[35] = opts.keycodes[1];
  return Buffer.concat([head, body]);
}

const STANDARD: [number, number, number] = [0xff0000, 0xff00, 0xff];

const xvfb = () =>
  setupReply({
    vendor: 'The X.Org Foundation', // 20 bytes: no padding
    formats: [
      [1, 1, 32],
      [16, 16, 32],
      [24, 32, 32],
    ],
    root: 0x3a1,
    size: [1024, 768],
    rootVisual: 0x21,
    rootDepth: 24,
    depths: [
      { depth: 1, visuals: [] },
      {
        depth: 24,
        visuals: [
          { id: 0x20, masks: [0xf800, 0x7e0, 0x1f] },
          { id: 0x21, masks: STANDARD },
        ],
      },
      { depth: 32, visuals: [{ id: 0x22, masks: STANDARD }] },
    ],
    keycodes: [8, 255],
  });

describe('connection setup', () => {
  it('asks for protocol 11.0, little-endian, without authorisation when there is no cookie', () => {
    expect([...setupRequest(undefined)]).toEqual([0x6c, 0, 11, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
  });

  it('sends MIT-MAGIC-COOKIE-1 and the cookie, each padded to 4 bytes', () => {
    const cookie = Buffer.from('0123456789abcdef');
    const req = setupRequest(cookie);
    expect(req.readUInt16LE(6)).toBe(18); // name length
    expect(req.readUInt16LE(8)).toBe(16); // data length
    expect(req.length).toBe(12 + 20 + 16);
    expect(req.toString('latin1', 12, 30)).toBe('MIT-MAGIC-COOKIE-1');
    expect([...req.subarray(30, 32)]).toEqual([0, 0]);
    expect(req.subarray(32)).toEqual(cookie);
  });

  it('reads the first screen: root, size, pixel format, root visual masks, keycodes', () => {
    const reply = xvfb();
    expect(setupReplyLength(reply.subarray(0, 8))).toBe(reply.length);
    expect(setupRefusal(reply)).toBeUndefined();
    expect(parseSetup(reply)).toEqual({
      root: 0x3a1,
      width: 1024,
      height: 768,
      depth: 24,
      format: { depth: 24, bitsPerPixel: 32, scanlinePad: 32 },
      masks: { red: 0xff0000, green: 0xff00, blue: 0xff },
      minKeycode: 8,
      maxKeycode: 255,
    });
  });

  it('skips a vendor string padded to 4 bytes', () => {
    const reply = setupReply({
      vendor: 'burrow', // 6 bytes + 2 padding
      formats: [[16, 16, 32]],
      root: 7,
      size: [640, 480],
      rootVisual: 9,
      rootDepth: 16,
      depths: [{ depth: 16, visuals: [{ id: 9, masks: [0xf800, 0x7e0, 0x1f] }] }],
      keycodes: [8, 100],
    });
    const screen = parseSetup(reply);
    expect(screen).toMatchObject({ root: 7, width: 640, height: 480, depth: 16 });
    expect(screen.format.bitsPerPixel).toBe(16);
    expect(screen.masks).toEqual({ red: 0xf800, green: 0x7e0, blue: 0x1f });
  });

  it('refuses screens it cannot convert', () => {
    const base = {
      vendor: 'x',
      root: 1,
      size: [10, 10] as [number, number],
      rootVisual: 5,
      keycodes: [8, 255] as [number, number],
    };
    const paletted = setupReply({
      ...base,
      formats: [[8, 8, 32]],
      rootDepth: 8,
      depths: [{ depth: 8, visuals: [{ id: 5, masks: [0, 0, 0] }] }],
    });
    expect(() => parseSetup(paletted)).toThrow('Unsupported X screen format (depth 8)');
    const noVisual = setupReply({
      ...base,
      formats: [[24, 32, 32]],
      rootDepth: 24,
      depths: [{ depth: 24, visuals: [{ id: 6, masks: STANDARD }] }],
    });
    expect(() => parseSetup(noVisual)).toThrow(/Unsupported X screen format/);
  });

  it('reads the reason of a refusal (Failed and Authenticate)', () => {
    const reason = Buffer.from('No protocol specified\n');
    const failed = Buffer.concat([
      Buffer.from([0, reason.length]),
      u16(11),
      u16(0),
      u16(pad4(reason).length / 4),
      pad4(reason),
    ]);
    expect(setupReplyLength(failed)).toBe(failed.length);
    expect(setupRefusal(failed)).toBe('No protocol specified');
    const auth = Buffer.concat([
      Buffer.from([2, 0, 0, 0, 0, 0]),
      u16(4),
      Buffer.from('Bad cookie\0\0\0\0\0\0', 'latin1'),
    ]);
    expect(setupRefusal(auth)).toBe('Bad cookie');
  });
});

describe('messages after setup', () => {
  it('frames replies by their length field, errors and events at 32 bytes', () => {
    const reply = Buffer.alloc(32);
    reply[0] = 1;
    reply.writeUInt32LE(3, 4);
    expect(messageLength(reply)).toBe(44);
    expect(messageLength(Buffer.alloc(32))).toBe(32); // error
    const event = Buffer.alloc(32);
    event[0] = 12; // Expose
    event.writeUInt32LE(99, 4); // not a length
    expect(messageLength(event)).toBe(32);
  });

  it('decodes replies, errors (code and opcode) and events', () => {
    const reply = Buffer.alloc(36);
    reply[0] = 1;
    reply.writeUInt16LE(0x1234, 2);
    reply.writeUInt32LE(0xdeadbeef, 32);
    expect(decodeMessage(reply)).toEqual({ kind: 'reply', seq: 0x1234, body: reply });
    expect(imageData(reply)).toEqual(u32(0xdeadbeef));

    const error = Buffer.alloc(32);
    error[1] = 8; // BadMatch
    error.writeUInt16LE(7, 2);
    error[10] = 73; // GetImage
    expect(decodeMessage(error)).toEqual({
      kind: 'error',
      seq: 7,
      message: 'X error 8 (request opcode 73)',
    });
    const event = Buffer.alloc(32);
    event[0] = 34; // MappingNotify
    expect(decodeMessage(event)).toEqual({ kind: 'event' });
  });

  it('encodes GetImage (ZPixmap, all planes) and GetInputFocus', () => {
    const req = getImageRequest(0x3a1, 0, 256, 1024, 128);
    expect(req.length).toBe(20);
    expect(req.readUInt16LE(2) * 4).toBe(req.length);
    expect([req[0], req[1]]).toEqual([73, 2]);
    expect(req.readUInt32LE(4)).toBe(0x3a1);
    expect([req.readInt16LE(8), req.readInt16LE(10)]).toEqual([0, 256]);
    expect([req.readUInt16LE(12), req.readUInt16LE(14)]).toEqual([1024, 128]);
    expect(req.readUInt32LE(16)).toBe(0xffffffff);
    expect([...getInputFocusRequest()]).toEqual([43, 0, 1, 0]);
  });

  it('computes ZPixmap row strides with scanline padding', () => {
    expect(stride({ depth: 24, bitsPerPixel: 32, scanlinePad: 32 }, 3)).toBe(12);
    expect(stride({ depth: 24, bitsPerPixel: 24, scanlinePad: 32 }, 3)).toBe(12);
    expect(stride({ depth: 16, bitsPerPixel: 16, scanlinePad: 32 }, 3)).toBe(8);
    expect(stride({ depth: 16, bitsPerPixel: 16, scanlinePad: 16 }, 3)).toBe(6);
  });
});

describe('keyboard mapping', () => {
  const a = 0x61;
  const A = 0x41;
  const Return = 0xff0d;
  const eAcute = 0xe9;
  const snowman = 0x1002603;

  /** A GetKeyboardMapping reply for keycodes 8.. with these keysyms per keycode. */
  function mappingReply(rows: number[][]): Buffer {
    const per = rows[0]!.length;
    const reply = Buffer.alloc(32 + rows.length * per * 4);
    reply[0] = 1;
    reply[1] = per;
    reply.writeUInt32LE(rows.length * per, 4);
    rows.flat().forEach((sym, i) => reply.writeUInt32LE(sym, 32 + i * 4));
    return reply;
  }

  const reply = mappingReply([
    [a, A], // 8
    [0, 0], // 9: spare
    [Return, 0], // 10
    [0, 0], // 11: spare
    [a, 0], // 12: `a` again
  ]);

  it('encodes GetKeyboardMapping', () => {
    expect([...getKeyboardMappingRequest(8, 248)]).toEqual([101, 0, 2, 0, 8, 248, 0, 0]);
  });

  it('reads which keysyms have a keycode (the lowest) and which keycodes are free', () => {
    const m = parseKeyboardMapping(reply, 8, 5);
    expect(m.perKeycode).toBe(2);
    expect([...m.bound]).toEqual([
      [a, 8],
      [A, 8],
      [Return, 10],
    ]);
    expect(m.spare).toEqual([9, 11]);
  });

  it('assigns spare keycodes (highest first) to missing keysyms only, once each', () => {
    const m = parseKeyboardMapping(reply, 8, 5);
    expect(assignKeycodes(m, [a, Return], new Map())).toEqual([]);
    expect(assignKeycodes(m, [eAcute, a, eAcute, snowman], new Map())).toEqual([
      { keysym: eAcute, keycode: 11 },
      { keysym: snowman, keycode: 9 },
    ]);
    expect(m.spare).toEqual([9, 11]); // the mapping is not consumed
  });

  it('reuses its own earlier bindings, oldest first, when no keycode is spare', () => {
    const full = parseKeyboardMapping(
      mappingReply([[a], [eAcute], [snowman], [Return]]), // 8..11, no spare
      8,
      4,
    );
    const ours = new Map([
      [eAcute, 9],
      [snowman, 10],
    ]);
    expect(assignKeycodes(full, [0x1000416], ours)).toEqual([{ keysym: 0x1000416, keycode: 9 }]);
    // a binding wanted now is not taken away
    expect(assignKeycodes(full, [eAcute, 0x1000416], ours)).toEqual([
      { keysym: 0x1000416, keycode: 10 },
    ]);
    // a keycode someone else has rebound since is not ours any more
    expect(assignKeycodes(full, [0x1000416], new Map([[eAcute, 11]]))).toBeUndefined();
    expect(assignKeycodes(full, [0x1000416, 0x1000417, 0x1000418], ours)).toBeUndefined();
  });

  it('encodes ChangeKeyboardMapping of one keycode at levels 1 and 2', () => {
    const req = changeKeyboardMappingRequest(11, 2, snowman);
    expect(req.length).toBe(16);
    expect(req.readUInt16LE(2) * 4).toBe(req.length);
    expect([req[0], req[1], req[4], req[5]]).toEqual([100, 1, 11, 2]);
    expect([req.readUInt32LE(8), req.readUInt32LE(12)]).toEqual([snowman, snowman]);
    const single = changeKeyboardMappingRequest(9, 1, eAcute);
    expect(single.length).toBe(12);
    expect(single.readUInt32LE(8)).toBe(eAcute);
  });
});

describe('Xauthority files', () => {
  const entry = (number: string, name: string, data: Buffer) => {
    const field = (b: Buffer) => {
      const len = Buffer.alloc(2);
      len.writeUInt16BE(b.length);
      return Buffer.concat([len, b]);
    };
    return Buffer.concat([
      Buffer.from([0x01, 0x00]), // FamilyLocal
      field(Buffer.from('host')),
      field(Buffer.from(number)),
      field(Buffer.from(name)),
      field(data),
    ]);
  };
  const cookie3 = Buffer.alloc(16, 3);
  const wildcard = Buffer.alloc(16, 0xaa);

  it('finds the cookie of the display number, else one for any display', () => {
    const file = Buffer.concat([
      entry('3', 'XDM-AUTHORIZATION-1', Buffer.alloc(8, 1)),
      entry('', 'MIT-MAGIC-COOKIE-1', wildcard),
      entry('3', 'MIT-MAGIC-COOKIE-1', cookie3),
    ]);
    expect(parseXauthority(file, '3')).toEqual(cookie3);
    expect(parseXauthority(file, '7')).toEqual(wildcard);
  });

  it('finds nothing in an empty file or one for other displays', () => {
    expect(parseXauthority(Buffer.alloc(0), '3')).toBeUndefined();
    expect(parseXauthority(entry('4', 'MIT-MAGIC-COOKIE-1', cookie3), '3')).toBeUndefined();
  });
});
