/**
 * The SNI reader on real ClientHello bytes. They are captured from Node's own TLS client writing
 * into an in-memory stream (no sockets: a unit test), then fed back whole, split at every byte,
 * refragmented into many TLS records, truncated, mutated and replaced by garbage.
 */
import { randomBytes } from 'node:crypto';
import { Duplex } from 'node:stream';
import tls from 'node:tls';
import { describe, expect, it } from 'vitest';
import { sniffClientHello } from '../../src/server/sandbox/egress/sni.js';

/** The first flight Node's TLS client sends for `opts`: a ClientHello in one or more records. */
function captureHello(opts: tls.ConnectionOptions): Promise<Buffer> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let settle: NodeJS.Timeout | undefined;
    const wire = new Duplex({
      read() {},
      write(chunk: Buffer, _encoding, callback) {
        chunks.push(chunk);
        callback();
        clearTimeout(settle);
        settle = setTimeout(() => {
          resolve(Buffer.concat(chunks));
          client.destroy();
        }, 20);
      },
    });
    const client = tls.connect({ ...opts, socket: wire });
    client.on('error', () => {});
  });
}

/** The handshake message inside `hello`'s records, re-cut into records of `size` bytes each. */
function refragment(hello: Buffer, size: number): Buffer {
  const parts: Buffer[] = [];
  for (let pos = 0; pos < hello.length;) {
    const len = hello.readUInt16BE(pos + 3);
    parts.push(hello.subarray(pos + 5, pos + 5 + len));
    pos += 5 + len;
  }
  const message = Buffer.concat(parts);
  const out: Buffer[] = [];
  for (let i = 0; i < message.length; i += size) {
    const frag = message.subarray(i, i + size);
    const header = Buffer.from([0x16, 0x03, 0x01, 0, 0]);
    header.writeUInt16BE(frag.length, 3);
    out.push(header, frag);
  }
  return Buffer.concat(out);
}

/** A minimal ClientHello record with the given extensions (type, data) for edge cases. */
function buildHello(extensions: [number, Buffer][] | undefined): Buffer {
  const body: Buffer[] = [
    Buffer.from([0x03, 0x03]),
    Buffer.alloc(32, 7),
    Buffer.from([0]), // session id
    Buffer.from([0, 2, 0x13, 0x01]), // one cipher suite
    Buffer.from([1, 0]), // null compression
  ];
  if (extensions) {
    const exts = Buffer.concat(
      extensions.map(([type, data]) => {
        const h = Buffer.alloc(4);
        h.writeUInt16BE(type, 0);
        h.writeUInt16BE(data.length, 2);
        return Buffer.concat([h, data]);
      }),
    );
    const len = Buffer.alloc(2);
    len.writeUInt16BE(exts.length);
    body.push(len, exts);
  }
  const b = Buffer.concat(body);
  const hs = Buffer.concat([Buffer.from([1, 0, b.length >> 8, b.length & 255]), b]);
  const rec = Buffer.from([0x16, 0x03, 0x01, hs.length >> 8, hs.length & 255]);
  return Buffer.concat([rec, hs]);
}

/** server_name extension data listing `names` (type, name) entries. */
function sni(...names: [number, Buffer | string][]): Buffer {
  const entries = Buffer.concat(
    names.map(([type, name]) => {
      const n = Buffer.from(name);
      return Buffer.concat([Buffer.from([type, n.length >> 8, n.length & 255]), n]);
    }),
  );
  return Buffer.concat([Buffer.from([entries.length >> 8, entries.length & 255]), entries]);
}

describe('sniffClientHello on real ClientHellos', () => {
  it('reads the server name', async () => {
    const hello = await captureHello({ servername: 'www.Example.com' });
    expect(sniffClientHello(hello)).toEqual({
      kind: 'client-hello',
      serverNames: ['www.Example.com'],
    });
  });

  it('reads a TLS 1.2-only hello, and one without SNI', async () => {
    const v12 = await captureHello({ servername: 'a.test', maxVersion: 'TLSv1.2' });
    expect(sniffClientHello(v12)).toEqual({ kind: 'client-hello', serverNames: ['a.test'] });
    const bare = await captureHello({ host: '127.0.0.1' });
    expect(sniffClientHello(bare)).toEqual({ kind: 'client-hello', serverNames: [] });
  });

  it('is incomplete at every split point, then complete', async () => {
    const hello = await captureHello({ servername: 'split.example.org' });
    for (let n = 1; n < hello.length; n++) {
      expect(sniffClientHello(hello.subarray(0, n)).kind).toBe('incomplete');
    }
    const tail = Buffer.concat([hello, Buffer.from('trailing bytes are ignored')]);
    expect(sniffClientHello(tail)).toEqual({
      kind: 'client-hello',
      serverNames: ['split.example.org'],
    });
  });

  it('reassembles a hello fragmented across many TLS records', async () => {
    const hello = await captureHello({ servername: 'frag.example.net' });
    for (const size of [1, 7, 100]) {
      const records = refragment(hello, size);
      expect(sniffClientHello(records)).toEqual({
        kind: 'client-hello',
        serverNames: ['frag.example.net'],
      });
      expect(sniffClientHello(records.subarray(0, records.length - 1)).kind).toBe('incomplete');
    }
  });

  it('never throws on mutated hellos', async () => {
    const hello = await captureHello({ servername: 'fuzz.example.com' });
    for (let i = 0; i < 3000; i++) {
      const bad = Buffer.from(hello);
      const flips = 1 + (i % 4);
      for (let f = 0; f < flips; f++) {
        bad[Math.floor(Math.random() * bad.length)] = Math.floor(Math.random() * 256);
      }
      const cut = i % 3 === 0 ? bad.subarray(0, Math.floor(Math.random() * bad.length)) : bad;
      expect(['incomplete', 'not-tls', 'invalid', 'client-hello']).toContain(
        sniffClientHello(cut).kind,
      );
    }
  });
});

describe('sniffClientHello on other bytes', () => {
  it('says not-tls for other protocols and garbage', () => {
    expect(sniffClientHello(Buffer.from('GET / HTTP/1.1\r\n\r\n')).kind).toBe('not-tls');
    expect(sniffClientHello(Buffer.from('SSH-2.0-OpenSSH_9.6\r\n')).kind).toBe('not-tls');
    for (let i = 0; i < 200; i++) {
      const junk = randomBytes(1 + (i % 64));
      if (junk[0] === 0x16) junk[0] = 0x17;
      expect(sniffClientHello(junk).kind).toBe('not-tls');
    }
  });

  it('is incomplete on nothing, invalid on TLS-looking garbage', () => {
    expect(sniffClientHello(Buffer.alloc(0)).kind).toBe('incomplete');
    expect(sniffClientHello(Buffer.from([0x16, 0x02, 0x00, 0x00, 0x05, 1, 2, 3, 4, 5])).kind).toBe(
      'invalid',
    );
    // Application data where the hello should be, a zero-length record, a ServerHello.
    expect(sniffClientHello(Buffer.from([0x16, 3, 1, 0, 0])).kind).toBe('invalid');
    expect(sniffClientHello(Buffer.from([0x16, 3, 1, 0, 4, 2, 0, 0, 0])).kind).toBe('invalid');
    const split = Buffer.from([0x16, 3, 1, 0, 2, 1, 0, 0x17, 3, 3, 0, 2, 0, 0]);
    expect(sniffClientHello(split).kind).toBe('invalid');
  });

  it('refuses a hello announcing more than the limit', () => {
    expect(sniffClientHello(Buffer.from([0x16, 3, 1, 0, 4, 1, 0x01, 0, 0])).kind).toBe('invalid');
  });
});

describe('sniffClientHello on built hellos', () => {
  it('handles no extensions, other name types and several host names', () => {
    expect(sniffClientHello(buildHello(undefined))).toEqual({
      kind: 'client-hello',
      serverNames: [],
    });
    expect(
      sniffClientHello(buildHello([[0, sni([1, 'x'], [0, 'a.test'], [0, 'b.test'])]])),
    ).toEqual({ kind: 'client-hello', serverNames: ['a.test', 'b.test'] });
  });

  it('refuses duplicate extensions, bad names and bad lengths', () => {
    const twice = buildHello([
      [0, sni([0, 'ok.test'])],
      [0, sni([0, 'blocked.test'])],
    ]);
    expect(sniffClientHello(twice).kind).toBe('invalid');
    for (const name of ['a\0.test', 'caf\xe9.test', 'a b.test', '']) {
      const hello = buildHello([[0, sni([0, Buffer.from(name, 'latin1')])]]);
      expect(sniffClientHello(hello).kind).toBe('invalid');
    }
    expect(sniffClientHello(buildHello([[0, Buffer.alloc(0)]])).kind).toBe('invalid');
    const lying = buildHello([[0, sni([0, 'ok.test'])]]);
    lying[lying.length - 8] = 0x40; // the name's length now runs past the extension
    expect(sniffClientHello(lying).kind).toBe('invalid');
  });
});
