/**
 * A drain on one server through `POST /v1/node/drain` (src/server/cluster/drain.ts; a cluster
 * node does the same and marks itself draining; cluster-death.test.ts drives the deadline and
 * the exit): readiness false at once, starts answered 503 `node_draining` with Retry-After, the
 * warm pool emptied, the running instance goes on. Liveness answers throughout.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '../../helpers/server.js';
import { useServer } from '../../helpers/use-server.js';

const server = useServer({ warmPool: { browser: 1 } }, { timeout: 60_000 });

beforeAll(async () => {
  await server.warmPool.ready();
}, 60_000);

describe('drain', () => {
  it('refuses starts, empties the warm pool, and lets the running instance go on', async () => {
    // readiness: the self-test runs at the first ask on a single server
    await eventually(
      async () => (await fetch(`${server.url}/readyz`)).status === 200,
      'ready',
      20_000,
    );
    const started = await server.api('/v1/start', { json: { instance_type: 'ubuntu' } });
    expect(started.status).toBe(200);
    const { id } = (await started.json()) as { id: string };
    expect(server.warmPool.counts().browser).toBe(1);

    const answer = await server.api('/v1/node/drain', { method: 'POST' });
    expect(answer.status).toBe(202);
    const { deadline } = (await answer.json()) as { deadline: string };
    expect(Date.parse(deadline)).toBeGreaterThan(Date.now());

    expect((await fetch(`${server.url}/readyz`)).status).toBe(503);
    expect((await fetch(`${server.url}/livez`)).status).toBe(200);
    const refused = await server.api('/v1/start', { json: { instance_type: 'browser' } });
    expect([refused.status, refused.headers.get('retry-after')]).toEqual([503, '5']);
    expect(refused.headers.get('x-burrow-error')).toBe('node_draining');
    await eventually(() => server.warmPool.counts().browser === 0, 'pool emptied', 10_000);

    // the instance still answers while the drain waits for it
    const bash = await server.api(`/v1/instance/${id}/bash`, { json: { command: 'echo still' } });
    expect(bash.status).toBe(200);
    expect(((await bash.json()) as { output: string }).output).toContain('still');
    // a second call changes nothing
    expect((await server.api('/v1/node/drain', { method: 'POST' })).status).toBe(202);
  }, 60_000);
});
