/**
 * The start, planned once. `POST /v1/start` (and the MCP tool that calls it) hands the request to
 * `planStart`, which applies the defaults, works out the browser identity, refuses what only a
 * browser instance can take, and says whether a warm-pool instance can serve it. Everything after
 * it (the handler resolving extensions and holding the profile, cluster placement choosing a node
 * with a warm instance, the registry claiming one or starting cold) reads the plan instead of the
 * request, so a new start option is one field here and one row of `WARM_REUSE`.
 *
 * What the plan names but the registry cannot fetch itself (uploaded extensions, a held profile:
 * their stores are the HTTP layer's) is resolved and held by `holdStart`, before anything of the
 * instance exists, and released by its caller when the start fails.
 *
 * `WARM_REUSE` is the one table of what lets a warm instance serve a start: every start option
 * has a row (the compiler holds it to the request's schema), and a start naming an option whose
 * row is `launch` is always started cold.
 */
import { identityOf, type BrowserIdentity } from '../../api/identity.js';
import type { InstanceType, ProxySettings, Resolution, StartRequest } from '../../api/index.js';
import { serverError } from '../errors.js';
import type { InstanceExtension, InstanceProfile, StartResources } from './runtime.js';
import {
  probeUpstream,
  upstreamFromSettings,
  type SandboxHost,
  type UpstreamProxy,
} from '../sandbox/index.js';

/** `[width, height]` of an instance started without `resolution`. */
export const DEFAULT_RESOLUTION: Resolution = [1024, 768];
/** Hours until an instance started without `timeout_hours` expires (as the schema's default). */
export const DEFAULT_TIMEOUT_HOURS = 1;

/**
 * What a warm-pool instance does with a start option:
 * - `pool`: picks which pooled instance is taken (its type);
 * - `claim`: applied when it is handed over (`InstanceRuntime.claim`, which may still answer that
 *   it cannot take the value: a fresh instance is then started);
 * - `clock`: the registry's own (expiry, idle), set at the claim like at a cold start;
 * - `launch`: read by the instance's Chromium when it starts, which a pooled one did already.
 */
export type WarmUse = 'pool' | 'claim' | 'clock' | 'launch';

/** Every start option and what a warm instance does with it. */
export const WARM_REUSE = {
  instance_type: 'pool',
  // a browser's windows take any size; an ubuntu display keeps its own (pool.ts takes one of it)
  resolution: 'claim',
  blocked_domains: 'claim',
  proxy: 'claim',
  timeout_hours: 'clock',
  idle_timeout_seconds: 'clock',
  extensions: 'launch',
  profile: 'launch',
  device: 'launch',
  user_agent: 'launch',
  locale: 'launch',
  timezone_id: 'launch',
  geolocation: 'launch',
} as const satisfies Record<keyof StartRequest, WarmUse>;

/** Whether a warm-pool instance can serve `request`: it names no option read at launch. */
export function warmServes(request: StartRequest): boolean {
  return (Object.keys(WARM_REUSE) as (keyof StartRequest)[]).every((option) => {
    if (WARM_REUSE[option] !== 'launch') return true;
    const value = request[option];
    return value === undefined || (Array.isArray(value) && value.length === 0);
  });
}

/** A start request with its defaults applied and its browser-only options checked. */
export interface StartPlan {
  readonly type: InstanceType;
  readonly resolution: readonly [number, number];
  readonly timeoutHours: number;
  /** The idle timeout in seconds; undefined: none. */
  readonly idleTimeoutSeconds: number | undefined;
  /** Bare host names the instance's browsers refuse. */
  readonly blockedDomains: readonly string[];
  /** The upstream proxy as asked for; checked and probed by `resolveUpstream` when it starts. */
  readonly proxy: ProxySettings | undefined;
  /** Device and identity every page of a browser instance gets (api/identity.ts). */
  readonly identity: BrowserIdentity | undefined;
  /** Ids of the uploaded extensions to load, each once. */
  readonly extensionIds: readonly string[];
  /** The persistent profile to run with: held by the handler from before the start. */
  readonly profile: { readonly name: string; readonly saveChanges: boolean } | undefined;
  /** A warm-pool instance can serve it (`WARM_REUSE`). */
  readonly warm: boolean;
}

/**
 * The plan of `request`, or the 400 of an option its type cannot take (extensions, then identity,
 * then a profile: browser instances only). Pure: nothing is resolved or held yet.
 */
export function planStart(request: StartRequest): StartPlan {
  const type = request.instance_type ?? 'ubuntu';
  const extensionIds = [...new Set(request.extensions ?? [])];
  if (extensionIds.length > 0 && type !== 'browser') {
    throw serverError('extensions_browser_only', { type });
  }
  // devices and identity: applied by the browser instance's Chromium (chromium/identity.ts)
  const identity = identityOf(request);
  if (identity && type !== 'browser') throw serverError('identity_browser_only', { type });
  if (request.profile && type !== 'browser') throw serverError('profiles_browser_only', { type });
  const [width, height] = request.resolution ?? DEFAULT_RESOLUTION;
  return Object.freeze({
    type,
    resolution: Object.freeze([width, height] as const),
    timeoutHours: request.timeout_hours ?? DEFAULT_TIMEOUT_HOURS,
    idleTimeoutSeconds: request.idle_timeout_seconds,
    blockedDomains: Object.freeze([...(request.blocked_domains ?? [])]),
    proxy: request.proxy,
    identity,
    extensionIds: Object.freeze(extensionIds),
    profile: request.profile && {
      name: request.profile.name,
      saveChanges: request.profile.save_changes ?? false,
    },
    warm: warmServes(request),
  });
}

/**
 * The start's upstream proxy, checked before anything of the instance exists (the 400s
 * `proxy_*` naming what is wrong, and the probe's answer); `undefined` without one. Its
 * credentials stay in this value, which only the instance's egress holds.
 */
export async function resolveUpstream(
  proxy: ProxySettings | undefined,
  host: SandboxHost,
): Promise<UpstreamProxy | undefined> {
  if (proxy === undefined) return undefined;
  if (!host.isolated) throw serverError('proxy_unsupported');
  const upstream = upstreamFromSettings(proxy);
  if ('error' in upstream) {
    throw serverError('bad_request', { detail: `proxy server ${upstream.error}` });
  }
  const failure = await probeUpstream(host, upstream);
  if (failure) throw serverError(failure.code, { reason: failure.message });
  return upstream;
}

/** Where a start's extensions and profile come from (extensions/store.ts, profiles/store.ts). */
export interface StartSources {
  /** The uploaded extensions of `ids`, or the 404 naming one that is unknown. */
  extensions(ids: readonly string[]): Promise<readonly InstanceExtension[]>;
  /** The profile `name`, held from now on (a second holder is a 409) until it is released. */
  profile(
    name: string,
    saveChanges: boolean,
  ): Promise<InstanceProfile & { setHolder(id: string): void }>;
}

/** What a start holds before its instance exists; `release` when the start failed. */
export interface StartHold extends StartResources {
  /** Let go of what is held (the profile; idempotent). */
  release(): void;
}

/**
 * The extensions `plan` names, resolved before anything starts, then its profile, held from here
 * until the instance has stopped and saved it, or the start failed (`release`).
 */
export async function holdStart(plan: StartPlan, sources: StartSources): Promise<StartHold> {
  const ids = plan.extensionIds;
  const extensions = ids.length > 0 ? await sources.extensions(ids) : [];
  if (!plan.profile) return { extensions, release: () => {} };
  const profile = await sources.profile(plan.profile.name, plan.profile.saveChanges);
  return { extensions, profile, onCreate: profile.setHolder, release: () => profile.release() };
}
