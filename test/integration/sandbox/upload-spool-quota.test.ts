/**
 * An upload whose file part comes before its `path` part waits for the path on the instance's
 * own disk (within its quota), never in the server's data dir: a file larger than the quota is
 * refused with 413 `disk_full` as soon as the disk is full, and the host's data dir never holds
 * the bytes. Sent in either order, a file within the quota lands whole.
 */
import { execFileSync } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { eventually, instanceDisk } from '../../helpers/server.js';
import { useInstance, useServer } from '../../helpers/use-server.js';

const MiB = 1024 ** 2;
const B = 'burrowSpoolBoundary';

const server = useServer(
  { maxUploadBytes: 256 * MiB, isolation: { allowHostLoopback: true, diskBytes: 48 * MiB } },
  { timeout: 120_000 },
);
const instance = useInstance(server, 'ubuntu', {}, 120_000);

/** Bytes of every file under `dir` (the data dir), counted as the host disk holds them. */
function bytesUnder(dir: string): number {
  const out = execFileSync('du', ['-sb', '--apparent-size', dir], { encoding: 'utf8' });
  return Number(out.split('\t')[0]);
}

/** Spool files waiting on the instance's disk (its root, which only the server reaches). */
function spoolOnDisk(): string[] {
  const root = join(instanceDisk(instance.id).home, '..');
  return readdirSync(root).filter((f) => f.startsWith('.upload-spool-'));
}

/** A multipart body streamed as `parts`; the answer's status and JSON. */
async function send(parts: (string | Buffer | (() => AsyncIterable<Buffer>))[]) {
  async function* body() {
    for (const p of parts) {
      if (typeof p === 'function') yield* p();
      else yield typeof p === 'string' ? Buffer.from(p) : p;
    }
  }
  const res = await fetch(`${server.url}/v1/instance/${instance.id}/upload`, {
    method: 'POST',
    headers: { 'x-api-key': server.apiKey, 'content-type': `multipart/form-data; boundary=${B}` },
    body: ReadableStreamFrom(body()),
    duplex: 'half',
  } as RequestInit);
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

function ReadableStreamFrom(it: AsyncIterable<Buffer>): ReadableStream<Uint8Array> {
  const iter = it[Symbol.asyncIterator]();
  return new ReadableStream({
    async pull(controller) {
      const next = await iter.next();
      if (next.done) controller.close();
      else controller.enqueue(new Uint8Array(next.value));
    },
  });
}

const fileHead = `--${B}\r\nContent-Disposition: form-data; name="file"; filename="f.bin"\r\nContent-Type: application/octet-stream\r\n\r\n`;
const pathPart = (p: string) =>
  `\r\n--${B}\r\nContent-Disposition: form-data; name="path"\r\n\r\n${p}\r\n--${B}--\r\n`;

/** `mib` MiB of zeros, a MiB at a time. */
const zeros = (mib: number) =>
  async function* () {
    for (let i = 0; i < mib; i++) yield Buffer.alloc(MiB);
  };

describe('an upload whose file comes before its path', () => {
  it('waits on the instance disk: a file past the quota is refused with disk_full, and the data dir never holds it', async () => {
    const before = bytesUnder(server.dataDir);
    let peak = 0;
    const watch = setInterval(() => {
      try {
        peak = Math.max(peak, bytesUnder(server.dataDir) - before);
      } catch {
        /* a file went away while du counted */
      }
    }, 50);
    try {
      const res = await send([fileHead, zeros(96), pathPart('big.bin')]);
      expect(res.status).toBe(413);
      expect(res.body).toEqual({ detail: expect.stringMatching(/space/i) as unknown });
    } finally {
      clearInterval(watch);
    }
    expect(peak).toBeLessThan(8 * MiB); // on today's code the whole 96 MiB were spooled there
    await eventually(() => spoolOnDisk().length === 0, 'the spool file to be removed');
    // the instance's disk is usable again: the spool is gone
    const ok = await send([
      `--${B}\r\nContent-Disposition: form-data; name="path"\r\n\r\nsmall.bin\r\n`,
      fileHead,
      zeros(4),
      `\r\n--${B}--\r\n`,
    ]);
    expect(ok.status, JSON.stringify(ok.body)).toBe(200);
  }, 120_000);

  it('lands whole when it fits, with nothing left waiting', async () => {
    const res = await send([fileHead, zeros(16), pathPart('later/sixteen.bin')]);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(statSync(join(instanceDisk(instance.id).home, 'later', 'sixteen.bin')).size).toBe(
      16 * MiB,
    );
    expect(spoolOnDisk()).toEqual([]);
  }, 120_000);
});
