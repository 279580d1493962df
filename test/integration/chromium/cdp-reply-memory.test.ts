/**
 * A huge CDP reply through `cdp_url` (a `Runtime.evaluate` returning a 200 MiB string) leaves the
 * server's memory near where it was: what the DevTools pipe, the mux and the relay held for it
 * is given back once it is garbage, rather than staying resident (it stayed at ~+170 MiB when
 * the pipe kept every 64 KiB chunk of the message until its end and joined them).
 *
 * The client runs in a process of its own, so the server's resident memory is this process's.
 */
import { execFile } from 'node:child_process';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, it } from 'vitest';
import { startBrowser } from '../../helpers/server.js';
import { useServer } from '../../helpers/use-server.js';

const run = promisify(execFile);
const MiB = 1024 * 1024;

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

/** A raw CDP client: attaches to the first page and evaluates a string of `argv[2]` MiB. */
const CLIENT = `
import WebSocket from 'ws';
const [url, mib] = process.argv.slice(-2);
const ws = new WebSocket(url, { maxPayload: 512 * 1024 * 1024, perMessageDeflate: false });
let next = 1;
const pending = new Map();
ws.on('message', (d) => {
  const m = JSON.parse(d.toString());
  if (m.id) pending.get(m.id)?.(m);
});
const send = (method, params = {}, sessionId) =>
  new Promise((r) => {
    const id = next++;
    pending.set(id, r);
    ws.send(JSON.stringify({ id, method, params, ...(sessionId && { sessionId }) }));
  });
await new Promise((r) => ws.once('open', r));
const { result } = await send('Target.getTargets');
const page = result.targetInfos.find((t) => t.type === 'page');
const attached = await send('Target.attachToTarget', { targetId: page.targetId, flatten: true });
const r = await send(
  'Runtime.evaluate',
  { expression: "'x'.repeat(" + Number(mib) + " * 1024 * 1024)", returnByValue: true },
  attached.result.sessionId,
);
process.stdout.write(String(r.result?.result?.value?.length ?? JSON.stringify(r.error)));
ws.close();
`;

async function evaluate(cdpUrl: string, mib: number): Promise<string> {
  const { stdout } = await run(
    process.execPath,
    ['--input-type=module', '-e', CLIENT, '--', cdpUrl, String(mib)],
    { cwd: process.cwd(), maxBuffer: 1 << 20 },
  );
  return stdout;
}

/** Resident memory after two full collections. */
async function settledRss(): Promise<number> {
  gc();
  await new Promise((r) => setTimeout(r, 300));
  gc();
  return process.memoryUsage().rss;
}

const server = useServer({}, { timeout: 120_000 });
let cdpUrl: string;

beforeAll(async () => {
  ({ cdpUrl } = await startBrowser(server));
}, 120_000);

describe('a 200 MiB CDP reply', () => {
  it('leaves the server within 64 MiB of its memory before', async () => {
    // the same path once with a small reply, so that what it loads is in the baseline
    expect(await evaluate(cdpUrl, 1)).toBe(String(MiB));
    const before = await settledRss();
    expect(await evaluate(cdpUrl, 200)).toBe(String(200 * MiB));
    expect(await evaluate(cdpUrl, 200)).toBe(String(200 * MiB));
    const after = await settledRss();
    expect((after - before) / MiB).toBeLessThan(64);
  }, 180_000);
});
