/**
 * The start's plan (src/server/instances/plan.ts): its defaults, the browser-only refusals in the
 * order the API answers them, the table of what a warm instance serves (one row per start option
 * of the schema), the status guard of the registry's operations (guard.ts) and the read-only
 * runtime context a warm-pool claim replaces instead of editing (runtime.ts).
 */
import { describe, expect, it } from 'vitest';
import { StartRequest } from '../../src/api/index.js';
import { refusal, requireStatus } from '../../src/server/instances/guard.js';
import {
  DEFAULT_RESOLUTION,
  holdStart,
  planStart,
  WARM_REUSE,
  warmServes,
} from '../../src/server/instances/plan.js';
import {
  claimedContext,
  type InstanceProfile,
  runtimeContext,
  type RuntimeContext,
} from '../../src/server/instances/runtime.js';

type HeldProfile = InstanceProfile & { setHolder(id: string): void };

describe('planStart', () => {
  it('applies the defaults, frozen', () => {
    const plan = planStart({});
    expect(plan).toEqual({
      type: 'ubuntu',
      resolution: [1024, 768],
      timeoutHours: 1,
      idleTimeoutSeconds: undefined,
      blockedDomains: [],
      proxy: undefined,
      identity: undefined,
      extensionIds: [],
      profile: undefined,
      warm: true,
    });
    expect(DEFAULT_RESOLUTION).toEqual([1024, 768]);
    expect(Object.isFrozen(plan)).toBe(true);
    expect(Object.isFrozen(plan.resolution)).toBe(true);
    expect(Object.isFrozen(plan.blockedDomains)).toBe(true);
  });

  it('keeps what the request says, extension ids once each', () => {
    const plan = planStart({
      instance_type: 'browser',
      resolution: [800, 600],
      timeout_hours: 2,
      idle_timeout_seconds: 30,
      blocked_domains: ['example.com'],
      extensions: ['ext_a', 'ext_b', 'ext_a'],
      profile: { name: 'p', save_changes: true },
      device: 'Pixel 5',
      locale: 'de-DE',
    });
    expect(plan).toMatchObject({
      type: 'browser',
      resolution: [800, 600],
      timeoutHours: 2,
      idleTimeoutSeconds: 30,
      blockedDomains: ['example.com'],
      extensionIds: ['ext_a', 'ext_b'],
      profile: { name: 'p', saveChanges: true },
      identity: { locale: 'de-DE', device: expect.objectContaining({ isMobile: true }) },
      warm: false,
    });
    expect(planStart({ instance_type: 'browser', profile: { name: 'p' } }).profile).toEqual({
      name: 'p',
      saveChanges: false,
    });
  });

  it('refuses browser-only options on another type: extensions, then identity, then a profile', () => {
    const refused = (req: StartRequest) => {
      try {
        planStart(req);
      } catch (err) {
        const e = err as { code: string; status: number; message: string };
        return { code: e.code, status: e.status, message: e.message };
      }
      return undefined;
    };
    const all = { extensions: ['ext_a'], device: 'Pixel 5', profile: { name: 'p' } };
    expect(refused({ instance_type: 'ubuntu', ...all })).toEqual({
      code: 'extensions_browser_only',
      status: 400,
      message: 'extensions are loaded by browser instances only, not by ubuntu instances',
    });
    expect(refused({ device: 'Pixel 5', profile: { name: 'p' } })).toMatchObject({
      code: 'identity_browser_only',
      status: 400,
    });
    expect(refused({ instance_type: 'windows', profile: { name: 'p' } })).toEqual({
      code: 'profiles_browser_only',
      status: 400,
      message: 'profiles are kept by browser instances only, not by windows instances',
    });
    expect(refused({ instance_type: 'browser', ...all })).toBeUndefined();
    // an empty list names no extension
    expect(refused({ instance_type: 'ubuntu', extensions: [] })).toBeUndefined();
  });
});

describe('holdStart', () => {
  /** Sources that record what was asked of them, in order. */
  const sources = (calls: string[]) => ({
    extensions: async (ids: readonly string[]) => {
      calls.push(`extensions ${ids.join(',')}`);
      return ids.map((id) => ({ id, dir: `/ext/${id}` }));
    },
    profile: async (name: string, saveChanges: boolean): Promise<HeldProfile> => {
      calls.push(`profile ${name} ${saveChanges}`);
      return {
        name,
        restore: (use) => use([]),
        maxBytes: 1,
        release: () => void calls.push(`release ${name}`),
        setHolder: (id: string) => void calls.push(`holder ${id}`),
      };
    },
  });

  it('resolves the extensions first, then holds the profile until released', async () => {
    const calls: string[] = [];
    const plan = planStart({
      instance_type: 'browser',
      extensions: ['ext_a'],
      profile: { name: 'p', save_changes: true },
    });
    const held = await holdStart(plan, sources(calls));
    expect(held.extensions).toEqual([{ id: 'ext_a', dir: '/ext/ext_a' }]);
    expect(held.profile?.name).toBe('p');
    held.onCreate?.('inst_1');
    held.release();
    expect(calls).toEqual(['extensions ext_a', 'profile p true', 'holder inst_1', 'release p']);
  });

  it('asks nothing of the stores for a start that names neither', async () => {
    const calls: string[] = [];
    const held = await holdStart(planStart({ instance_type: 'browser' }), sources(calls));
    held.release();
    expect(held).toMatchObject({ extensions: [] });
    expect(held.profile).toBeUndefined();
    expect(held.onCreate).toBeUndefined();
    expect(calls).toEqual([]);
  });
});

describe('what a warm instance serves', () => {
  it('has one row for every option of the start request', () => {
    expect(Object.keys(WARM_REUSE).sort()).toEqual(Object.keys(StartRequest.shape).sort());
  });

  it('serves a start that names no option read at launch', () => {
    expect(warmServes({})).toBe(true);
    expect(
      warmServes({
        instance_type: 'browser',
        resolution: [640, 480],
        blocked_domains: ['example.com'],
        proxy: { server: 'http://127.0.0.1:3128' },
        timeout_hours: 3,
        idle_timeout_seconds: 60,
        extensions: [],
      }),
    ).toBe(true);
    const launch: StartRequest[] = [
      { extensions: ['ext_a'] },
      { profile: { name: 'p' } },
      { device: 'Pixel 5' },
      { user_agent: 'UA' },
      { locale: 'de-DE' },
      { timezone_id: 'Europe/Berlin' },
      { geolocation: { latitude: 1, longitude: 2 } },
    ];
    for (const req of launch) expect(warmServes({ instance_type: 'browser', ...req })).toBe(false);
    expect(launch.map((r) => Object.keys(r)[0]).sort()).toEqual(
      Object.entries(WARM_REUSE)
        .filter(([, use]) => use === 'launch')
        .map(([option]) => option)
        .sort(),
    );
  });
});

describe('the status guard', () => {
  it('passes a status the action takes and answers the others with the action’s error', () => {
    const rec = (status: 'deploying' | 'running' | 'paused' | 'terminated') => ({
      id: 'inst_1',
      status,
    });
    expect(requireStatus(rec('running'), 'use', 'running').status).toBe('running');
    expect(() => requireStatus(rec('deploying'), 'use', 'running')).toThrow(
      'Instance inst_1 is still deploying',
    );
    expect(() => requireStatus(rec('paused'), 'use', 'running')).toThrow(
      'Instance inst_1 is paused',
    );
    expect(refusal('pause', rec('terminated'))).toMatchObject({
      code: 'instance_not_running',
      status: 400,
    });
    expect(() => requireStatus(rec('terminated'), 'resume', 'paused', 'running')).toThrow(
      'Instance inst_1 is terminated, not paused',
    );
    expect(refusal('extend', rec('terminated'))).toMatchObject({
      code: 'instance_gone',
      status: 410,
      message: 'Instance inst_1 is terminated',
    });
  });
});

describe('the runtime context', () => {
  const ctx: RuntimeContext = {
    instance: { id: 'inst_1', type: 'browser', dir: '/tmp/x', token: 't' },
    plan: { resolution: [1024, 768], blockedDomains: [], pooled: true, extensions: [] },
    services: {
      publicUrl: 'http://127.0.0.1:1',
      log: { info() {}, warn() {}, error() {}, debug() {} } as never,
      chromiumPath: '',
      maxUploadBytes: 1,
      sandboxHost: {} as never,
      failed: () => {},
    },
  };

  it('is frozen with its groups and lists', () => {
    const frozen = runtimeContext(ctx);
    for (const part of [
      frozen,
      frozen.instance,
      frozen.plan,
      frozen.services,
      frozen.plan.resolution,
      frozen.plan.blockedDomains,
      frozen.plan.extensions,
    ]) {
      expect(Object.isFrozen(part)).toBe(true);
    }
  });

  it('is replaced, not edited, by a claim: the user’s plan, no longer pooled', () => {
    const pooled = runtimeContext(ctx);
    const claimed = claimedContext(pooled, {
      resolution: [800, 600],
      blockedDomains: ['example.com'],
    });
    expect(claimed.plan).toMatchObject({
      resolution: [800, 600],
      blockedDomains: ['example.com'],
      pooled: false,
    });
    expect(claimed.instance).toEqual(pooled.instance);
    expect(pooled.plan).toMatchObject({
      resolution: [1024, 768],
      blockedDomains: [],
      pooled: true,
    });
  });
});
