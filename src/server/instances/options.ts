/**
 * What the registry is made with (index.ts builds it from the server's settings): its cap, the
 * runtimes of each type, what every instance is lent, the warm pool, the sandboxes made ahead
 * and the instance store.
 */
import type { InstanceType } from '../../api/index.js';
import type { Logger } from '../../internal/log.js';
import type { ProgramPaths } from '../config.js';
import type { Sandbox, SandboxHost } from '../sandbox/index.js';
import type { WarmPoolSizes } from './pool.js';
import type { RuntimeFactory } from './runtime.js';
import type { InstanceStore } from './store.js';

export interface RegistryOptions {
  /** Directory for this server run's instance directories. */
  instancesDir: string;
  /** Live (deploying, running, paused) instances allowed at once. */
  maxInstances: number;
  factories: Partial<Record<InstanceType, RuntimeFactory>>;
  publicUrl: () => string;
  chromiumPath: string;
  /** Chromium's operator flags, Xvfb and x11vnc (src/server/config.ts). Default `DEFAULT_PROGRAMS`. */
  programs?: ProgramPaths;
  maxUploadBytes: number;
  log: Logger;
  /** The sandbox layer (what this machine can isolate, limits, egress policy). */
  sandboxHost: SandboxHost;
  /**
   * Why an instance of `type` cannot start on this machine (a program it needs is missing:
   * requirements.ts), or undefined. Default: no check.
   */
  requirementsRefusal?: (type: InstanceType) => Promise<string | undefined>;
  /** Instances kept started per type for `start` to claim (pool.ts). Default none. */
  warmPool?: WarmPoolSizes;
  /**
   * Sandboxes made ahead for starts the warm pool does not serve (sandbox/stock.ts), named by
   * ids minted here. Default none.
   */
  sandboxStock?: number;
  /**
   * What a sandbox made ahead gets written into it before it is ready (the stock's `prepare`,
   * sandbox/stock.ts), e.g. a Chromium profile's skeleton. Default nothing.
   */
  stockPrepare?: (sandbox: Sandbox) => Promise<void>;
  /**
   * Where the rows of listed instances are written, and the earlier runs' rows come from
   * (`adopt`). Default: a `MemoryInstanceStore` without a journal.
   */
  store?: InstanceStore;
  /** A new instance id; default `inst_` and 16 random hex digits (a cluster's ids: cluster/ids.ts). */
  newId?: () => string;
  /**
   * Whether this server can take a start now, beyond its own cap: rejects with the answer for
   * the client (a cluster node whose database does not answer: cluster/node.ts). Default: yes.
   */
  admission?: () => Promise<void>;
  /**
   * Something the cap counts changed: an instance moved (started, claimed, ended) or the warm
   * pool gained one. Called often; a cluster node publishes its free slots from it, debounced.
   */
  changed?: () => void;
}
