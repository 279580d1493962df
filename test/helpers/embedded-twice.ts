/**
 * Run by test/integration/sandbox/limits-required.test.ts (as root, and as a normal user) with
 * `node --import tsx`: two embedded servers in one process, as code calls `startServer`, and
 * `STARTS` browser instances started and stopped on each. What the process writes on stderr is
 * the test's to count; stdout gets one JSON line with each start's status.
 */
import { startServer } from '../../src/server/index.js';

const starts = Number(process.env.STARTS ?? 0);
const statuses: number[] = [];
for (let i = 0; i < 2; i++) {
  const server = await startServer({ host: '127.0.0.1', port: 0, logLevel: 'silent' });
  try {
    for (let n = 0; n < starts; n++) {
      const headers = { 'x-api-key': server.apiKey, 'content-type': 'application/json' };
      const res = await fetch(`${server.url}/v1/start`, {
        method: 'POST',
        headers,
        body: JSON.stringify({ instance_type: 'browser' }),
      });
      statuses.push(res.status);
      const { id } = (await res.json()) as { id?: string };
      if (id) await fetch(`${server.url}/v1/instance/${id}/stop`, { method: 'POST', headers });
    }
  } finally {
    await server.close();
  }
}
console.log(JSON.stringify({ statuses }));
