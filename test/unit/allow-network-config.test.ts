/**
 * `--allow-network` (issue 35): private networks instances may reach, from the option, the flag
 * (repeatable) or `BURROW_ALLOW_NETWORK` (comma-separated); anything that is no CIDR is an error
 * naming where it came from, never ignored (ignoring it would leave a network the operator meant
 * to open closed, or worse, a typo unnoticed).
 */
import { describe, expect, it } from 'vitest';
import { serveConfig } from '../../src/cli/serve.js';
import { resolveServerConfig } from '../../src/server/config.js';

const KEY = 'key-0123456789';

describe('allowNetworks', () => {
  it('is none by default', () => {
    expect(
      resolveServerConfig({ apiKey: KEY }, {}).sandbox.isolation.allowNetworks,
    ).toBeUndefined();
  });

  it('comes from the option, else the variable, and is frozen', () => {
    const c = resolveServerConfig(
      { apiKey: KEY, isolation: { allowNetworks: ['10.0.0.0/8', 'fd00::/8', '192.168.1.7'] } },
      { BURROW_ALLOW_NETWORK: '172.16.0.0/12' },
    );
    expect(c.sandbox.isolation.allowNetworks).toEqual(['10.0.0.0/8', 'fd00::/8', '192.168.1.7']);
    expect(Object.isFrozen(c.sandbox.isolation.allowNetworks)).toBe(true);
    const e = resolveServerConfig(
      { apiKey: KEY },
      { BURROW_ALLOW_NETWORK: '10.0.0.0/8, fc00::/7' },
    );
    expect(e.sandbox.isolation.allowNetworks).toEqual(['10.0.0.0/8', 'fc00::/7']);
  });

  it('refuses what is no CIDR, naming its source', () => {
    for (const bad of ['10.0.0.0/33', '10/8', 'example.com/8', '::/129', '10.0.0.0/']) {
      expect(
        () => resolveServerConfig({ apiKey: KEY, isolation: { allowNetworks: [bad] } }, {}),
        bad,
      ).toThrow(/isolation\.allowNetworks/);
    }
    expect(() =>
      resolveServerConfig({ apiKey: KEY }, { BURROW_ALLOW_NETWORK: '10.0.0.0/8,nope' }),
    ).toThrow(/BURROW_ALLOW_NETWORK: nope/);
  });

  it('is repeatable as a flag of burrow serve', async () => {
    const config = await serveConfig(
      ['--api-key', KEY, '--allow-network', '10.0.0.0/8', '--allow-network', '100.64.0.0/10'],
      {},
    );
    expect(config?.options.isolation?.allowNetworks).toEqual(['10.0.0.0/8', '100.64.0.0/10']);
  });
});
