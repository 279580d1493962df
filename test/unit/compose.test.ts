/**
 * What a server is made of besides its machine (src/server/cluster/compose.ts), alone: the
 * single-node defaults, so that startServer asks the same of a server and of a cluster node.
 * A node's parts need PostgreSQL: test/integration/cluster-*.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { compose } from '../../src/server/cluster/compose.js';
import { resolveServerConfig } from '../../src/server/config.js';
import { MemoryInstanceStore } from '../../src/server/instances/store.js';

const log = { info: () => {}, warn: () => {}, error: () => {}, debug: () => {} };

describe('compose, without a cluster', () => {
  it('gives the single-node defaults: a journal, files, its own ids, no plug-in', async () => {
    const config = resolveServerConfig({ host: '127.0.0.1' }, {}, () => 'bk_test_key_0123');
    const parts = await compose(config, { log, journal: '/nonexistent/journal', earlier: [] });
    expect(parts.clustered).toBe(false);
    expect(parts.name).toBe('127.0.0.1');
    expect(parts.run).toBeUndefined();
    expect(parts.store).toBeInstanceOf(MemoryInstanceStore);
    // the store's files, capped as one project's, under the total of every project's
    const caps = config.storeCaps.authStates;
    expect(parts.authStates).toEqual({ caps: { count: caps.count, bytes: caps.bytes } });
    expect(caps.bytes).toBeLessThanOrEqual(caps.totalBytes);
    const small = resolveServerConfig(
      { host: '127.0.0.1', maxAuthStateBytesTotal: 1024 },
      {},
      () => 'bk_test_key_0123',
    );
    const smallParts = await compose(small, { log, journal: '/nonexistent/j', earlier: [] });
    expect(smallParts.authStates.caps?.bytes).toBe(1024);
    await smallParts.close();
    expect(parts.extensions).toBeUndefined();
    expect(parts.profiles).toBeUndefined();
    expect(parts.http).toBeUndefined();
    expect(parts.registry).toEqual({});
    expect(parts.drainMs).toBe(300_000);
    await expect(parts.admit()).resolves.toBeUndefined();
    await expect(parts.listening('http://127.0.0.1:1')).resolves.toBeUndefined();
    await expect(parts.drain()).resolves.toBeUndefined();
    await parts.close();
  });

  it('adopts the earlier runs’ rows when the server opens, before it listens', async () => {
    const config = resolveServerConfig({}, {}, () => 'bk_test_key_0123');
    const parts = await compose(config, { log, journal: '/nonexistent/journal', earlier: [] });
    let adopted = 0;
    const registry = { adopt: async () => void adopted++ } as never;
    await parts.open({ registry, health: {} as never, sandboxHost: {} as never });
    expect(adopted).toBe(1);
  });

  it('refuses a cluster without the key every node shares, before connecting', async () => {
    const config = resolveServerConfig(
      { cluster: { databaseUrl: 'postgres://127.0.0.1:1/none', nodeName: 'n1' } },
      {},
      () => 'bk_test_key_0123',
    );
    await expect(
      compose(config, { log, journal: '/nonexistent/journal', earlier: [] }),
    ).rejects.toThrow(/needs the auth-state key every node shares/);
  });
});
