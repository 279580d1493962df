/**
 * The SNI reader on hand-built ClientHellos, field by field: each malformed field is refused for
 * its own reason (the reason is what the egress's `tls_invalid` refusal tells the client), the
 * bounds are exact (a record of 16 KiB and a hello of 16 KiB pass, one byte more does not), every
 * split point of a hello spread over several records is `incomplete`, and the printable-ASCII rule
 * of a server name includes its end points.
 */
import { describe, expect, it } from 'vitest';
import { MAX_CLIENT_HELLO_BYTES, sniffClientHello } from '../../src/server/sandbox/egress/sni.js';

const u16 = (n: number) => Buffer.from([n >> 8, n & 255]);
const RANDOM = Buffer.alloc(32, 7);
const SUITES = Buffer.concat([u16(2), Buffer.from([0x13, 0x01])]);
const COMPRESSION = Buffer.from([1, 0]);

/** A handshake message of `type` with `body`, in records of at most `max` bytes of fragment. */
function records(body: Buffer, { type = 1, max = 16384, major = 3 } = {}): Buffer {
  const msg = Buffer.concat([
    Buffer.from([type, body.length >> 16, (body.length >> 8) & 255, body.length & 255]),
    body,
  ]);
  const out: Buffer[] = [];
  for (let i = 0; i < msg.length; i += max) {
    const frag = msg.subarray(i, i + max);
    out.push(Buffer.from([0x16, major, 1]), u16(frag.length), frag);
  }
  return Buffer.concat(out);
}

/** A ClientHello body: version, random, session id, suites, compression, then `rest`. */
const body = (rest: Buffer = Buffer.alloc(0), session = Buffer.alloc(0)) =>
  Buffer.concat([
    Buffer.from([3, 3]),
    RANDOM,
    Buffer.from([session.length]),
    session,
    SUITES,
    COMPRESSION,
    rest,
  ]);

/** The extensions block of `exts` (type, data). */
const extensions = (...exts: [number, Buffer][]) => {
  const inner = Buffer.concat(exts.map(([t, d]) => Buffer.concat([u16(t), u16(d.length), d])));
  return Buffer.concat([u16(inner.length), inner]);
};

/** server_name extension data of (type, name) entries. */
const serverNames = (...names: [number, Buffer | string][]) => {
  const list = Buffer.concat(
    names.map(([t, n]) => {
      const b = Buffer.from(n);
      return Buffer.concat([Buffer.from([t]), u16(b.length), b]);
    }),
  );
  return Buffer.concat([u16(list.length), list]);
};

const reason = (data: Buffer) => {
  const r = sniffClientHello(data);
  return r.kind === 'invalid' ? r.reason : `not invalid: ${JSON.stringify(r)}`;
};

describe('each malformed field is refused for its own reason', () => {
  it('the fixed fields and the vectors before the extensions', () => {
    const cases: [Buffer, string][] = [
      [Buffer.alloc(0), 'truncated version'],
      [Buffer.from([3]), 'truncated version'],
      [Buffer.from([2, 0]), 'ClientHello version 2'],
      [Buffer.concat([Buffer.from([3, 3]), RANDOM.subarray(1)]), 'truncated random'],
      [Buffer.concat([Buffer.from([3, 3]), RANDOM]), 'truncated session id'],
      [Buffer.concat([Buffer.from([3, 3]), RANDOM, Buffer.from([4, 1])]), 'truncated session id'],
      [
        Buffer.concat([Buffer.from([3, 3]), RANDOM, Buffer.from([33]), Buffer.alloc(33)]),
        'session id over 32 bytes',
      ],
      [Buffer.concat([Buffer.from([3, 3]), RANDOM, Buffer.from([0])]), 'truncated cipher suites'],
      [Buffer.concat([Buffer.from([3, 3]), RANDOM, Buffer.from([0]), u16(0)]), 'cipher suites'],
      [
        Buffer.concat([Buffer.from([3, 3]), RANDOM, Buffer.from([0]), u16(3), Buffer.alloc(3)]),
        'cipher suites',
      ],
      [
        Buffer.concat([Buffer.from([3, 3]), RANDOM, Buffer.from([0]), SUITES]),
        'truncated compression methods',
      ],
      [
        Buffer.concat([Buffer.from([3, 3]), RANDOM, Buffer.from([0]), SUITES, Buffer.from([0])]),
        'no compression method',
      ],
      [body(Buffer.from([0])), 'truncated extensions'],
      [body(Buffer.concat([u16(10), Buffer.alloc(4)])), 'truncated extensions'],
      [
        body(Buffer.concat([extensions([5, Buffer.alloc(2)]), Buffer.from([0])])),
        'bytes after the extensions',
      ],
    ];
    for (const [b, want] of cases) expect(reason(records(b)), want).toBe(want);
  });

  it('the extensions and the server name list', () => {
    const ext = (inner: Buffer) => body(Buffer.concat([u16(inner.length), inner]));
    const cases: [Buffer, string][] = [
      [ext(Buffer.from([0])), 'truncated extension type'],
      [ext(Buffer.from([0, 5, 0])), 'truncated extension'],
      [ext(Buffer.concat([u16(5), u16(4), Buffer.alloc(2)])), 'truncated extension'],
      [body(extensions([7, Buffer.alloc(0)], [7, Buffer.alloc(1)])), 'duplicate extension 7'],
      [
        body(extensions([0, serverNames([0, 'a.test'])], [0, serverNames([0, 'b.test'])])),
        'duplicate extension 0',
      ],
      [body(extensions([0, Buffer.alloc(0)])), 'truncated server name list'],
      [
        body(extensions([0, Buffer.concat([u16(3), Buffer.alloc(1)])])),
        'truncated server name list',
      ],
      [
        body(extensions([0, Buffer.concat([serverNames([0, 'a.test']), Buffer.from([0])])])),
        'bytes after the server name list',
      ],
      [body(extensions([0, u16(0)])), 'empty server name list'],
      [body(extensions([0, Buffer.concat([u16(1), Buffer.from([0])])])), 'truncated server name'],
      [
        body(extensions([0, Buffer.concat([u16(3), Buffer.from([0, 0, 9])])])),
        'truncated server name',
      ],
      [
        body(extensions([0, serverNames([0, ''])])),
        'server name is not a printable ASCII host name',
      ],
    ];
    for (const [b, want] of cases) expect(reason(records(b)), want).toBe(want);
  });

  it('the records and the handshake header', () => {
    // a second record of another type inside a hello that spans two
    const split = records(body(), { max: 20 });
    const second = 5 + 20;
    const alert = Buffer.from(split);
    alert[second] = 0x15;
    expect(reason(alert)).toBe('record type 21 inside the ClientHello');
    const v2 = Buffer.from(split);
    v2[second + 1] = 2;
    v2[second + 2] = 9;
    expect(reason(v2)).toBe('record version 2.9');
    expect(reason(records(body(), { major: 4 }))).toBe('record version 4.1');
    expect(reason(Buffer.from([0x16, 3, 1, 0, 0]))).toBe('record length 0');
    expect(reason(Buffer.concat([Buffer.from([0x16, 3, 1]), u16(16385), Buffer.from([1])]))).toBe(
      'record length 16385',
    );
    expect(reason(records(body(), { type: 2 }))).toBe('handshake type 2, not ClientHello');
    const huge = Buffer.from([0x16, 3, 1, 0, 4, 1, 0, 0x40, 0x01]);
    expect(reason(huge)).toBe(`ClientHello of ${MAX_CLIENT_HELLO_BYTES + 1} bytes`);
  });
});

describe('the bounds are exact', () => {
  /** A hello whose body is exactly `size` bytes (padding in an extension of type 21). */
  const sized = (size: number) => {
    const fixed = body(extensions([0, serverNames([0, 'big.test'])], [21, Buffer.alloc(0)]));
    return body(
      extensions([0, serverNames([0, 'big.test'])], [21, Buffer.alloc(size - fixed.length)]),
    );
  };

  it('a ClientHello of the limit is read; one byte more is refused', () => {
    const atLimit = sized(MAX_CLIENT_HELLO_BYTES);
    expect(atLimit.length).toBe(MAX_CLIENT_HELLO_BYTES);
    expect(sniffClientHello(records(atLimit))).toEqual({
      kind: 'client-hello',
      serverNames: ['big.test'],
    });
    expect(sniffClientHello(records(sized(MAX_CLIENT_HELLO_BYTES + 1))).kind).toBe('invalid');
  });

  it('a record of 16 KiB of fragment is accepted', () => {
    const hello = records(sized(16384 - 4)); // the handshake header fills the rest of the record
    expect(hello.readUInt16BE(3)).toBe(16384);
    expect(sniffClientHello(hello)).toEqual({ kind: 'client-hello', serverNames: ['big.test'] });
  });
});

describe('a hello over several records', () => {
  const hello = records(body(extensions([0, serverNames([0, 'multi.test'])])), { max: 9 });

  it('is incomplete at every split point, record headers included', () => {
    for (let n = 1; n < hello.length; n++) {
      expect(sniffClientHello(hello.subarray(0, n)).kind, `first ${n} bytes`).toBe('incomplete');
    }
    expect(sniffClientHello(hello)).toEqual({ kind: 'client-hello', serverNames: ['multi.test'] });
  });

  it('ignores what follows the hello in its last record (another handshake message)', () => {
    const msg = Buffer.concat([
      Buffer.from([1, 0, 0, 0]),
      body(extensions([0, serverNames([0, 'tail.test'])])),
    ]);
    msg.writeUIntBE(msg.length - 4, 1, 3);
    const more = Buffer.concat([msg, Buffer.from([20, 0, 0, 2, 9, 9])]); // a second message
    const cut = 11;
    const out = [
      Buffer.concat([Buffer.from([0x16, 3, 1]), u16(cut), more.subarray(0, cut)]),
      Buffer.concat([Buffer.from([0x16, 3, 1]), u16(more.length - cut), more.subarray(cut)]),
    ];
    expect(sniffClientHello(Buffer.concat(out))).toEqual({
      kind: 'client-hello',
      serverNames: ['tail.test'],
    });
  });
});

describe('a server name is printable ASCII', () => {
  it('from `!` to `~` inclusive, nothing outside', () => {
    const named = (name: Buffer) =>
      sniffClientHello(records(body(extensions([0, serverNames([0, name])]))));
    expect(named(Buffer.from('!a~'))).toEqual({ kind: 'client-hello', serverNames: ['!a~'] });
    for (const b of [0x20, 0x7f, 0x00, 0x80, 0xff]) {
      expect(named(Buffer.from([0x61, b, 0x62])).kind, `byte ${b}`).toBe('invalid');
    }
  });
});
