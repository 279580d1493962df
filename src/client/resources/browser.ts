import type {
  BrowserStartResult,
  CdpUrlResult,
  CurrentUrlResult,
  SaveAuthResult,
  StatusResult,
} from '../../api/index.js';
import type { Core, Query, RequestOptions } from '../core.js';

export type SaveAuthQuery = Query<'saveAuth'>;
export type ModifyAuthQuery = Query<'modifyAuth'>;
export type AuthenticateQuery = Query<'authenticate'>;

/** The instance's Chromium and its saved authentication states. */
export class BrowserTools {
  constructor(private readonly core: Core) {}

  /** `POST /v1/instance/{instance_id}/browser/start`. */
  start(instanceId: string, opts?: RequestOptions): Promise<BrowserStartResult> {
    return this.core.request('browserStart', { params: { instance_id: instanceId } }, opts);
  }

  /** `GET /v1/instance/{instance_id}/browser/cdp_url`: a `ws://` URL carrying a token. */
  cdpUrl(instanceId: string, opts?: RequestOptions): Promise<CdpUrlResult> {
    return this.core.request('browserCdpUrl', { params: { instance_id: instanceId } }, opts);
  }

  /** `GET /v1/instance/{instance_id}/browser/current_url`. */
  currentUrl(instanceId: string, opts?: RequestOptions): Promise<CurrentUrlResult> {
    return this.core.request('browserCurrentUrl', { params: { instance_id: instanceId } }, opts);
  }

  /** `POST /v1/instance/{instance_id}/browser/save_auth` (default name `"default"`). */
  saveAuth(
    instanceId: string,
    query: SaveAuthQuery = {},
    opts?: RequestOptions,
  ): Promise<SaveAuthResult> {
    return this.core.request('saveAuth', { params: { instance_id: instanceId }, query }, opts);
  }

  /** `POST /v1/instance/{instance_id}/browser/modify_auth`: overwrite a state, maybe rename it. */
  modifyAuth(
    instanceId: string,
    query: ModifyAuthQuery,
    opts?: RequestOptions,
  ): Promise<SaveAuthResult> {
    return this.core.request('modifyAuth', { params: { instance_id: instanceId }, query }, opts);
  }

  /** `POST /v1/instance/{instance_id}/browser/authenticate`: load a saved state. */
  authenticate(
    instanceId: string,
    query: AuthenticateQuery,
    opts?: RequestOptions,
  ): Promise<StatusResult> {
    return this.core.request('authenticate', { params: { instance_id: instanceId }, query }, opts);
  }

  /** `POST /v1/instance/{instance_id}/browser/stop`. */
  stop(instanceId: string, opts?: RequestOptions): Promise<StatusResult> {
    return this.core.request('browserStop', { params: { instance_id: instanceId } }, opts);
  }
}
