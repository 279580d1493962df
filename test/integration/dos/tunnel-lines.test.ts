/**
 * What reading a tunnel's lines costs the server (egress/host-lines.ts): an instance started with
 * `blocked_domains` opens a CONNECT tunnel without TLS to an allowed server on the host and sends
 * a body the Host rule reads line by line, as fast as it can: only line ends (each line end used
 * to rescan the rest of the socket read: 23 ms of main thread per 64 KiB), then, at 16 MiB/s,
 * `Host: a`, 8,100 spaces and `b` (a pattern that backtracked over the spaces: 0.4 s per 64 KiB;
 * these lines are parsed one by one, so at full speed they still cost a tunnel's worth of main
 * thread: ISOLATION.md, "Resources"). An outside
 * tester stalled `/livez` for 2–6 s so. Now another client's `/livez` stays fast while the bytes
 * flow, and they reach the upstream.
 */
import { createServer, type Server } from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { livezBound, said, watchLivez } from '../../helpers/livez-beside.js';
import { useInstance, useServer } from '../../helpers/use-server.js';

/** An upstream that reads and drops whatever comes, counting it. */
let sink: Server;
let port = 0;
let received = 0;
beforeAll(async () => {
  sink = createServer((socket) => {
    socket.on('data', (d: Buffer) => (received += d.length));
    socket.on('error', () => {});
  });
  await new Promise<void>((r) => sink.listen(0, '127.0.0.1', r));
  port = (sink.address() as AddressInfo).port;
});
afterAll(() => new Promise<void>((r) => sink.close(() => r())));

const server = useServer({}, { timeout: 180_000 });
const instance = useInstance(server, 'ubuntu', { blocked_domains: ['blocked.test'] }, 180_000);

/**
 * Inside the instance: a tunnel to the sink carrying MODE's body for SECS seconds, as fast as it
 * goes, or at RATE MiB/s.
 */
const FLOOD = (mode: 'lf' | 'redos', secs: number, rate = 0) => `
import socket, time
line = b'Host: a' + b' ' * 8100 + b'b\\n'
chunk = b'\\n' * 65536 if ${JSON.stringify(mode)} == 'lf' else line * (65536 // len(line))
s = socket.create_connection(('127.0.0.1', 3128))
s.sendall(b'CONNECT 127.0.0.1:${port} HTTP/1.1\\r\\nHost: 127.0.0.1:${port}\\r\\n\\r\\n')
print(s.recv(4096).split(b'\\r\\n')[0].decode())
s.sendall(b'POST /sink HTTP/1.1\\r\\nHost: 127.0.0.1:${port}\\r\\nContent-Length: 100000000000\\r\\n\\r\\n')
sent = 0
t0 = time.time()
end = t0 + ${secs}
s.settimeout(5)
while time.time() < end:
    s.sendall(chunk)
    sent += len(chunk)
    if ${rate}:
        time.sleep(max(0, sent / (${rate} * 2**20) - (time.time() - t0)))
print('sent', sent)
`;

/**
 * A flood of `mode` lines at `rate` MiB/s (0: as fast as it goes), and `/livez` beside it: its
 * p99 is held to 100 ms above what a server with nothing to do answers in the same window
 * (livez-beside.ts). The old code gave 6.9 s and 9.6 s.
 */
async function flood(mode: 'lf' | 'redos', rate = 0) {
  const watch = await watchLivez(server.url);
  const got = received;
  const run = server
    .api(`/v1/instance/${instance.id}/bash`, {
      json: { command: `python3 - <<'PY'\n${FLOOD(mode, 6, rate)}\nPY`, timeout: 60 },
    })
    .then(async (res) => ({ status: res.status, body: (await res.json()) as { output?: string } }));
  const seen = await watch.until(run);
  const { status, body } = await run;
  console.log(`tunnel-lines ${mode}:`, said(seen), `${Math.round((received - got) / 2 ** 20)} MiB`);
  expect(status).toBe(200);
  expect(body.output).toContain('HTTP/1.1 200');
  const sent = Number(/sent (\d+)/.exec(body.output ?? '')?.[1]);
  return { seen, sent, arrived: received - got };
}

describe('a tunnel carrying lines the Host rule reads', () => {
  it(
    'of line ends only: the bytes pass and /livez stays fast',
    { retry: 1, timeout: 120_000 },
    async () => {
      const { seen, sent, arrived } = await flood('lf');
      expect(sent).toBeGreaterThan(4 * 2 ** 20); // the attack ran
      expect(arrived).toBeGreaterThan(sent / 2);
      expect(seen.server.p99).toBeLessThan(livezBound(seen));
    },
  );

  it(
    'of Host lines padded with spaces, 16 MiB/s of them: the same',
    { retry: 1, timeout: 120_000 },
    async () => {
      // each line is parsed (a 64 KiB read of them costs about 0.35 ms); at 16 MiB/s the old
      // pattern needed 100 s of main thread per second
      const { seen, sent } = await flood('redos', 16);
      expect(sent).toBeGreaterThan(32 * 2 ** 20);
      expect(seen.server.p99).toBeLessThan(livezBound(seen));
    },
  );
});
