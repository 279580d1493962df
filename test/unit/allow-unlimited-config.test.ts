/**
 * `--allow-unlimited` (issue 35): whether instances may start where they cannot get cgroup limits.
 * Off for `burrow serve` (a server for others) unless the flag or `BURROW_ALLOW_UNLIMITED=1` says
 * so; on for `startServer` from code (the embedded default) unless the option or the variable
 * says `0`. A variable that is neither is an error naming it, never read as either.
 */
import { describe, expect, it } from 'vitest';
import { serveConfig } from '../../src/cli/serve.js';
import { ConfigError, resolveServerConfig } from '../../src/server/config.js';

const KEY = 'key-0123456789';
const fromCode = (options: object, env: Record<string, string>) =>
  resolveServerConfig({ apiKey: KEY, ...options }, env).sandbox.isolation.allowUnlimited;
const fromServe = async (argv: string[], env: Record<string, string>) =>
  (await serveConfig(argv, env))?.options.isolation?.allowUnlimited;

describe('allowUnlimited', () => {
  it('burrow serve: off unless the flag or the variable says on', async () => {
    expect(await fromServe([], {})).toBe(false);
    expect(await fromServe(['--allow-unlimited'], {})).toBe(true);
    expect(await fromServe([], { BURROW_ALLOW_UNLIMITED: '1' })).toBe(true);
    expect(await fromServe([], { BURROW_ALLOW_UNLIMITED: '0' })).toBe(false);
    expect(await fromServe([], { BURROW_ALLOW_UNLIMITED: '' })).toBe(false);
    // what serve hands startServer wins over the variable startServer would read
    const options = (await serveConfig([], {}))!.options;
    expect(fromCode(options, { BURROW_ALLOW_UNLIMITED: '1' })).toBe(false);
  });

  it('startServer from code: on unless the option or the variable says off', () => {
    expect(fromCode({}, {})).toBe(true);
    expect(fromCode({}, { BURROW_ALLOW_UNLIMITED: '0' })).toBe(false);
    expect(fromCode({ isolation: { allowUnlimited: false } }, {})).toBe(false);
    expect(
      fromCode({ isolation: { allowUnlimited: true } }, { BURROW_ALLOW_UNLIMITED: 'off' }),
    ).toBe(true);
  });

  it('a variable that is no switch is an error naming it', async () => {
    expect(() => fromCode({}, { BURROW_ALLOW_UNLIMITED: 'sure' })).toThrow(ConfigError);
    expect(() => fromCode({}, { BURROW_ALLOW_UNLIMITED: 'sure' })).toThrow(
      /^BURROW_ALLOW_UNLIMITED must be 1 or 0, not "sure"$/,
    );
    await expect(fromServe([], { BURROW_ALLOW_UNLIMITED: 'sure' })).rejects.toThrow(
      /BURROW_ALLOW_UNLIMITED must be 1 or 0/,
    );
  });
});
