/**
 * The server's log is the operator's disk: nothing an instance repeats may write to it without
 * bound (ISOLATION.md, "Resources": log lines). From inside a real ubuntu instance, its shell holds
 * the egress's 256 connections and then connects and closes in a loop: every try past the cap is
 * refused (`busy`). Before the bound, each refusal was a warning line (thousands a second); now the
 * instance's lines are bounded per kind and per level in each minute (src/internal/log-budget.ts).
 * A client repeating a request the server logs is bounded the same way (http/app.ts).
 */
import { describe, expect, it } from 'vitest';
import { DEFAULT_LOG_BUDGET } from '../../../src/internal/log-budget.js';
import { useInstance, useServer } from '../../helpers/use-server.js';

const logs: string[] = [];
const server = useServer(
  { logDestination: { write: (line) => void logs.push(line) } },
  { timeout: 180_000 },
);
const instance = useInstance(server, 'ubuntu', {}, 180_000);

const FLOOD = `
import socket, time
held = [socket.create_connection(("127.0.0.1", 3128)) for _ in range(256)]
time.sleep(0.5)
n = 0
end = time.time() + 5
while time.time() < end:
    try:
        s = socket.create_connection(("127.0.0.1", 3128)); s.close(); n += 1
    except OSError:
        pass
print("tries", n)
`;

describe("an instance flooding the egress's connection cap", () => {
  it('writes a bounded number of log lines, whatever the number of refusals', async () => {
    const before = logs.length;
    const res = await server.api(`/v1/instance/${instance.id}/bash`, {
      json: { command: `python3 - <<'PY'\n${FLOOD}\nPY`, timeout: 60 },
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { output?: string; error?: string };
    const tries = Number(/tries (\d+)/.exec(body.output ?? '')?.[1]);
    // the attack really ran: far more refusals than the bound lets through
    expect(tries, JSON.stringify(body)).toBeGreaterThan(1000);
    const during = logs.slice(before);
    const busy = during.filter((l) => l.includes('"code":"busy"'));
    expect(busy.length).toBeGreaterThan(0); // the operator still hears of it
    expect(busy.length).toBeLessThanOrEqual(DEFAULT_LOG_BUDGET.perKind);
    // every line of the minute, whoever wrote it: the instance's at most `total` per level kept
    // (info, warn, error) plus one summary, and the server's own few
    expect(during.length).toBeLessThanOrEqual(3 * DEFAULT_LOG_BUDGET.total + 1 + 20);
  }, 120_000);
});

describe('a client repeating a request whose answer the server logs', () => {
  it('writes a bounded number of lines, whatever the number of requests', async () => {
    const before = logs.length;
    // keys of projects on a single server: 501, logged as a warning each time before the bound
    for (let i = 0; i < 300; i++) {
      const res = await server.api('/v1/keys');
      expect(res.status).toBe(501);
      await res.arrayBuffer();
    }
    const lines = logs.slice(before).filter((l) => l.includes('"code":"keys_need_cluster"'));
    expect(lines.length).toBeGreaterThan(0); // the operator still hears of it
    expect(lines.length).toBeLessThanOrEqual(DEFAULT_LOG_BUDGET.perKind);
  }, 60_000);
});
