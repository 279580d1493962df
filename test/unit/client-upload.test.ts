/**
 * `instance.upload` streams multipart/form-data from four kinds of source. The fake server parses
 * the body with the platform's own multipart parser (`Response#formData`) and checks the bytes.
 */
import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  Burrow,
  InvalidRequestError,
  PayloadTooLargeError,
  RequestFailedError,
  ServerError,
} from '../../src/client/index.js';

const sha = (bytes: Uint8Array) => createHash('sha256').update(bytes).digest('hex');

interface Received {
  url: string;
  headers: IncomingHttpHeaders;
  raw: Buffer;
  fields: Record<string, string>;
  file: File | undefined;
  bytes: Buffer;
}

let dir: string;
const cleanups: (() => Promise<unknown>)[] = [];
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'burrow-upload-'));
});
afterEach(async () => {
  await Promise.all(cleanups.splice(0).map((c) => c()));
  await rm(dir, { recursive: true, force: true });
});

/** An upload endpoint; `status` other than 200 answers with that status instead. */
async function uploadServer(status = 200) {
  const received: Received[] = [];
  let progress = Buffer.alloc(0);
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    progress = Buffer.alloc(0);
    req.on('data', (c: Buffer) => {
      chunks.push(c);
      progress = Buffer.concat([progress, c]);
    });
    req.on('end', async () => {
      const raw = Buffer.concat(chunks);
      const form = await new Response(raw, {
        headers: { 'content-type': req.headers['content-type'] ?? '' },
      }).formData();
      const file = form.get('file');
      const entry: Received = {
        url: req.url ?? '',
        headers: req.headers,
        raw,
        fields: Object.fromEntries(
          [...form].filter(([, v]) => typeof v === 'string') as [string, string][],
        ),
        file: file instanceof File ? file : undefined,
        bytes: file instanceof File ? Buffer.from(await file.arrayBuffer()) : Buffer.alloc(0),
      };
      received.push(entry);
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify(
          status === 200
            ? {
                filename: entry.file?.name,
                path: entry.fields['path'],
                media_type: entry.file?.type,
              }
            : { detail: `status ${status}` },
        ),
      );
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const burrow = new Burrow({
    baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    apiKey: 'k',
  });
  cleanups.push(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
    await burrow.close();
  });
  /** Resolves once the server has received `marker` in the body of the current request. */
  const arrived = async (marker: Buffer) => {
    while (!progress.includes(marker)) await new Promise((resolve) => setTimeout(resolve, 5));
  };
  return { burrow, received, arrived };
}

/**
 * Two chunks, the second produced only after the server has received the first: a client that
 * buffered the whole source before sending would never finish.
 */
function handshakeChunks(arrived: (marker: Buffer) => Promise<void>) {
  const first = Buffer.concat([randomBytes(100_000), Buffer.from('<<END OF FIRST CHUNK>>')]);
  const second = randomBytes(50_000);
  async function* generate() {
    yield first;
    await arrived(Buffer.from('<<END OF FIRST CHUNK>>'));
    yield second;
  }
  return { generate, all: Buffer.concat([first, second]) };
}

describe('instance.upload', () => {
  it('streams a file named by its path', async () => {
    const { burrow, received } = await uploadServer();
    const bytes = randomBytes(3 * 1024 * 1024 + 17);
    const file = join(dir, 'report.bin');
    await writeFile(file, bytes);
    const result = await burrow.instance.upload('i-1', { file, path: 'docs/r.bin' });
    expect(result).toEqual({
      filename: 'report.bin',
      path: 'docs/r.bin',
      media_type: 'application/octet-stream',
    });
    expect(received).toHaveLength(1);
    expect(received[0]?.url).toBe('/v1/instance/i-1/upload');
    expect(received[0]?.headers['transfer-encoding']).toBe('chunked');
    expect(sha(received[0]?.bytes ?? Buffer.alloc(0))).toBe(sha(bytes));
  });

  it('sends a Buffer or Uint8Array, named after the destination unless told otherwise', async () => {
    const { burrow, received } = await uploadServer();
    const bytes = randomBytes(1000);
    await burrow.instance.upload('i-1', { file: bytes, path: '/home/u/data.bin' });
    await burrow.instance.upload('i-1', {
      file: new Uint8Array(bytes),
      path: 'x',
      filename: 'a"b\r\n.txt',
      mediaType: 'text/plain',
    });
    expect(received[0]?.file?.name).toBe('data.bin');
    expect(received[0]?.bytes.equals(bytes)).toBe(true);
    expect(received[1]?.bytes.equals(bytes)).toBe(true);
    expect(received[1]?.file?.type).toBe('text/plain');
    // Quoted as browsers do, so the header cannot be broken out of.
    expect(received[1]?.raw.toString('latin1')).toContain('filename="a%22b%0D%0A.txt"');
  });

  it('sends a Blob or File with its name and type', async () => {
    const { burrow, received } = await uploadServer();
    const bytes = randomBytes(70_000);
    await burrow.instance.upload('i-1', {
      file: new File([bytes], 'photo.png', { type: 'image/png' }),
      path: 'p',
    });
    await burrow.instance.upload('i-1', { file: new Blob([bytes]), path: 'q/blob.dat' });
    expect(received.map((r) => [r.file?.name, r.file?.type, r.fields['path']])).toEqual([
      ['photo.png', 'image/png', 'p'],
      ['blob.dat', 'application/octet-stream', 'q/blob.dat'],
    ]);
    for (const r of received) expect(r.bytes.equals(bytes)).toBe(true);
  });

  it('streams a Node Readable without waiting for its end', { timeout: 10_000 }, async () => {
    const { burrow, received, arrived } = await uploadServer();
    const { generate, all } = handshakeChunks(arrived);
    await burrow.instance.upload('i-1', { file: Readable.from(generate()), path: 'stream.bin' });
    expect(sha(received[0]?.bytes ?? Buffer.alloc(0))).toBe(sha(all));
  });

  it('streams a web ReadableStream without waiting for its end', { timeout: 10_000 }, async () => {
    const { burrow, received, arrived } = await uploadServer();
    const { generate, all } = handshakeChunks(arrived);
    const iterator = generate();
    const stream = new ReadableStream<Uint8Array>({
      async pull(controller) {
        const next = await iterator.next();
        if (next.done) controller.close();
        else controller.enqueue(new Uint8Array(next.value));
      },
    });
    await burrow.instance.upload('i-1', { file: stream, path: 'web.bin' });
    expect(sha(received[0]?.bytes ?? Buffer.alloc(0))).toBe(sha(all));
  });

  it.each([
    ['a missing file', () => ({ file: join(dir, 'nope.bin'), path: 'x' }), 'file'],
    ['a directory', () => ({ file: dir, path: 'x' }), 'file'],
    ['a number as the file', () => ({ file: 42 as never, path: 'x' }), 'file'],
    ['an empty destination', () => ({ file: Buffer.from('x'), path: '' }), 'path'],
    [
      'a media type with CRLF',
      () => ({ file: Buffer.from('x'), path: 'x', mediaType: 'a\r\nX: y' }),
      'mediaType',
    ],
  ])('rejects %s before sending', async (_, input, field) => {
    const { burrow, received } = await uploadServer();
    const error = await burrow.instance.upload('i-1', input()).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InvalidRequestError);
    expect((error as InvalidRequestError).issues[0]?.loc).toEqual(['body', field]);
    expect(received).toHaveLength(0);
  });

  it('is never retried, even on 503 with retries allowed', async () => {
    const { burrow, received } = await uploadServer(503);
    const upload = burrow.instance.upload(
      'i-1',
      { file: Buffer.from('x'), path: 'x' },
      { maxRetries: 3 },
    );
    await expect(upload).rejects.toBeInstanceOf(ServerError);
    expect(received).toHaveLength(1);
  });

  it('413 → PayloadTooLargeError', async () => {
    const { burrow } = await uploadServer(413);
    const upload = burrow.instance.upload('i-1', { file: randomBytes(10_000), path: 'x' });
    await expect(upload).rejects.toBeInstanceOf(PayloadTooLargeError);
  });

  it("the source's own error is a RequestFailedError with it as cause", async () => {
    const { burrow } = await uploadServer();
    const boom = new Error('disk on fire');
    const source = Readable.from(
      (async function* () {
        yield Buffer.from('partial');
        throw boom;
      })(),
    );
    const err = await burrow.instance
      .upload('i-1', { file: source, path: 'x' })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RequestFailedError);
    expect((err as RequestFailedError).code).toBe('request_failed');
    expect((err as Error).cause).toBe(boom);
    expect((err as Error).message).toContain('on fire'); // the key of this test is one letter, redacted
  });
});
