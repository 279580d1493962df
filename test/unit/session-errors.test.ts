/** The bridge's errors: stable codes, messages that say what to do, cleanup errors attached. */
import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';
import {
  AmbiguousAuthStateError,
  AuthStateNotFoundError,
  PeerDependencyError,
  SessionError,
  SessionStoppedError,
  withCleanupError,
} from '../../src/session/errors.js';

const require = createRequire(import.meta.url);

describe('PeerDependencyError.load', () => {
  it('turns "not installed" into an error that names the package to install', async () => {
    const error: unknown = await PeerDependencyError.load(
      'burrow-no-such-peer',
      'burrow/x',
      async () => require('burrow-no-such-peer'),
    ).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PeerDependencyError);
    expect(error).toBeInstanceOf(SessionError);
    expect(error).toMatchObject({
      name: 'PeerDependencyError',
      code: 'peer_missing',
      packageName: 'burrow-no-such-peer',
      neededBy: 'burrow/x',
      message:
        'burrow/x needs the optional peer dependency "burrow-no-such-peer", which is not installed: run `npm install burrow-no-such-peer`',
    });
    expect((error as Error).cause).toMatchObject({ code: 'MODULE_NOT_FOUND' });
  });

  it('rethrows anything else unchanged, a missing *other* module included', async () => {
    const other = await PeerDependencyError.load('playwright-core', 'burrow/x', async () =>
      require('burrow-no-such-transitive-dep'),
    ).catch((e: unknown) => e);
    expect(other).not.toBeInstanceOf(PeerDependencyError);
    expect(other).toMatchObject({ code: 'MODULE_NOT_FOUND' });
    const boom = new Error('boom');
    await expect(
      PeerDependencyError.load('playwright-core', 'burrow/x', () => Promise.reject(boom)),
    ).rejects.toBe(boom);
  });

  it('passes the module through when it loads', async () => {
    await expect(PeerDependencyError.load('x', 'y', async () => 42)).resolves.toBe(42);
  });
});

describe('auth state errors', () => {
  it('an ambiguous name lists every id; its name property stays the class name', () => {
    const e = new AmbiguousAuthStateError('github', ['auth_1', 'auth_2']);
    expect(e).toMatchObject({
      name: 'AmbiguousAuthStateError',
      code: 'auth_state_ambiguous',
      stateName: 'github',
      ids: ['auth_1', 'auth_2'],
    });
    expect(e.message).toBe(
      'The name "github" matches 2 saved auth states (auth_1, auth_2); pass one of these ids instead',
    );
    expect(new AuthStateNotFoundError('x').message).toBe(
      'No saved auth state has the id or name "x"',
    );
    expect(new SessionStoppedError('page').message).toBe('page: this session is stopped');
  });
});

describe('withCleanupError', () => {
  it('attaches the cleanup failure to the original error and returns the original', () => {
    const primary = new Error('connect failed');
    const secondary = new Error('stop failed');
    expect(withCleanupError(primary, secondary)).toBe(primary);
    expect((primary as Error & { cleanupError: unknown }).cleanupError).toBe(secondary);
    const clean = new Error('x');
    expect(withCleanupError(clean, undefined)).toBe(clean);
    expect('cleanupError' in clean).toBe(false);
    expect(withCleanupError('a string', secondary)).toBe('a string');
  });
});
