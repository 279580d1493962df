import { Core, type BurrowOptions } from './core.js';
import { Downloads, Recordings } from './resources/artifacts.js';
import { AuthStates } from './resources/auth-states.js';
import { BrowserTools } from './resources/browser.js';
import { Code } from './resources/code.js';
import { Env } from './resources/env.js';
import { Extensions } from './resources/extensions.js';
import { Keys } from './resources/keys.js';
import { Node } from './resources/node.js';
import { Profiles } from './resources/profiles.js';
import { InstanceTools } from './resources/instance.js';
import { Instances } from './resources/instances.js';
import { Meta } from './resources/meta.js';
import { Notebooks } from './resources/notebooks.js';

/**
 * Typed client for all 32 operations of the Remote Instance Control Service. One keep-alive
 * connection pool per client; `close()` (or `await using`) releases it.
 */
export class Burrow implements AsyncDisposable {
  /** The resolved base URL (origin and path prefix, no trailing slash). */
  readonly baseUrl: string;
  readonly instances: Instances;
  readonly authStates: AuthStates;
  readonly instance: InstanceTools;
  readonly browser: BrowserTools;
  readonly code: Code;
  readonly notebooks: Notebooks;
  readonly env: Env;
  /** burrow extension: `version()`. */
  readonly meta: Meta;
  /** burrow extension: downloads kept by the server. */
  readonly downloads: Downloads;
  /** burrow extension: screen recordings. */
  readonly recordings: Recordings;
  /** burrow extension: uploaded browser extensions. */
  readonly extensions: Extensions;
  /** burrow extension: persistent browser profiles. */
  readonly profiles: Profiles;
  /** burrow extension, cluster mode: API keys of projects (admin key only). */
  readonly keys: Keys;
  /** burrow extension: the node the base URL reaches (`drain`; admin key only). */
  readonly node: Node;
  readonly #core: Core;

  constructor(options: BurrowOptions = {}) {
    const core = new Core(options);
    this.#core = core;
    this.baseUrl = core.baseUrl;
    this.instances = new Instances(core);
    this.authStates = new AuthStates(core);
    this.instance = new InstanceTools(core);
    this.browser = new BrowserTools(core);
    this.code = new Code(core);
    this.notebooks = new Notebooks(core);
    this.env = new Env(core);
    this.meta = new Meta(core);
    this.downloads = new Downloads(core);
    this.recordings = new Recordings(core);
    this.extensions = new Extensions(core);
    this.profiles = new Profiles(core);
    this.keys = new Keys(core);
    this.node = new Node(core);
  }

  /** Waits for requests in flight, then closes the connection pool. Idempotent. */
  close(): Promise<void> {
    return this.#core.close();
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }
}
