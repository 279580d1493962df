/**
 * The artifact reader against a link the instance plants, from the instance's shell: a finished
 * recording replaced by a link to a FIFO of the host. The server runs as root and resolves an
 * absolute link on the host, so opening through it (even to refuse it a moment later) opens the
 * host's FIFO: a host process blocked writing to it is released, and learns a reader came. The
 * reader must not follow the link at all (`O_NOFOLLOW`), neither when the recording is fetched
 * nor when the instance's artifacts are copied out at stop.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, mkdtempSync, openSync, closeSync, constants, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Burrow, NotFoundError } from '../../../src/client/index.js';
import { until } from '../../../src/internal/deadline.js';
import { testServer, type TestServer } from '../../helpers/server.js';

let server: TestServer;
let client: Burrow;
let hostDir: string;
let fifo: string;
/** A host process blocked opening the FIFO for writing; prints `released` once a reader opens it. */
let writer: ChildProcess;
let released = false;

beforeAll(async () => {
  hostDir = mkdtempSync(join(tmpdir(), 'burrow-fifo-'));
  chmodSync(hostDir, 0o700); // nothing but root on the host reaches it
  fifo = join(hostDir, 'fifo');
  execFileSync('mkfifo', ['-m', '600', fifo]);
  writer = spawn('sh', ['-c', 'exec 3>"$0"; echo released', fifo], {
    stdio: ['ignore', 'pipe', 'ignore'],
  });
  writer.stdout!.on('data', (d: Buffer) => {
    if (d.toString().includes('released')) released = true;
  });
  server = await testServer();
  client = new Burrow({ baseUrl: server.url, apiKey: server.apiKey, maxRetries: 0 });
});

afterAll(async () => {
  writer?.kill('SIGKILL');
  await server?.close();
  if (hostDir) rmSync(hostDir, { recursive: true, force: true });
});

/** Waits a moment for the writer: true when something opened the FIFO for reading. */
async function writerReleased(ms = 1500): Promise<boolean> {
  return until(() => released, { timeoutMs: ms, intervalMs: 50 });
}

describe('a recording replaced by a link to a host FIFO', () => {
  it('is refused (404) without the host FIFO ever being opened, fetched or copied out at stop', async () => {
    const id = (await client.instances.start({ instance_type: 'ubuntu' })).id;
    const { recording_id } = await client.recordings.start(id);
    await sleep(1200);
    expect(await client.recordings.stop(id)).toMatchObject({ state: 'completed' });

    // the instance swaps its finished clip for a link to the host's FIFO
    const ln = await client.instance.bash(id, {
      command: `f=$(ls ~/Recordings/${recording_id}.mp4) && ln -sf ${fifo} "$f" && ls -l "$f"`,
    });
    expect(ln.output).toContain(`-> ${fifo}`);

    const err = await client.recordings.get(id, recording_id).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(NotFoundError);
    expect(await writerReleased(), 'the server opened the host FIFO when fetching').toBe(false);

    await client.instances.stop(id);
    const kept = await client.recordings.list(id);
    expect(kept.map((r) => r.id)).not.toContain(recording_id);
    expect(await writerReleased(), 'the server opened the host FIFO when copying out').toBe(false);

    // the trap is real: the first reader to open the FIFO releases the writer
    const fd = openSync(fifo, constants.O_RDONLY | constants.O_NONBLOCK);
    try {
      expect(await writerReleased(5_000)).toBe(true);
    } finally {
      closeSync(fd);
    }
  }, 120_000);
});
