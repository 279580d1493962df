/**
 * Liveness and readiness, for Kubernetes probes and for the other nodes of a cluster.
 *
 * - `GET /livez`: 200 while the event loop answers. Nothing else is checked (a database down or
 *   a full machine is not cured by a restart), but one thing a restart does cure: a cluster node
 *   that lost its place (declared lost while it was cut off, its name taken) answers 503.
 * - `GET /readyz`: 200 when this server can start a sandbox, else 503. "Can start" is proven once
 *   by doing it: a self-test that creates one sandbox, runs `true` in it and removes it (the
 *   namespaces, cgroup and disk of a real instance, without a browser: about as cheap as a start
 *   gets). It turns false at once when a drain begins, and stays false while the server closes.
 *   It never asks the database: a database that does not answer is a cluster-wide state, and
 *   taking every node out of a Service for it would make things worse, not better.
 *
 * Both answer without the API key and say nothing but `ok` or `not ready`: a Kubernetes
 * `httpGet` probe cannot carry a header from a Secret, and what these reveal (a burrow listens
 * here, and whether it takes starts) any client learns from the 401 and 503 of the API itself.
 * Every API route still needs the key. They live on the API's own port rather than a health
 * port of their own, because the other nodes of a cluster probe a node at the one URL it
 * advertises (../cluster/death.ts).
 */
import { randomBytes } from 'node:crypto';
import { mkdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from './runtime.js';
import { Sandbox, type SandboxHost } from '../sandbox/index.js';

export const HEALTH_PATHS: ReadonlySet<string> = new Set(['/livez', '/readyz']);

/**
 * The header of `/livez` that names the answering process's cluster run (cluster/node.ts): a node
 * restarted at the same URL answers the probes meant for its previous run, and this tells the two
 * apart (cluster/death.ts). Not a secret: the run is in the nodes' table and says nothing of the
 * instances.
 */
export const RUN_HEADER = 'x-burrow-run';

/** Milliseconds the self-test may take before it counts as failed. */
const SELF_TEST_TIMEOUT_MS = 30_000;

export class Health {
  readonly #host: SandboxHost;
  readonly #dir: string;
  readonly #log: Logger;
  #selfTest: Promise<boolean> | undefined;
  #passed = false;
  #draining = false;
  #closing = false;
  #lost = false;
  /** A cluster node between listening and its join (`joining`): not ready, whatever it can do. */
  #joining = false;
  /** This process's cluster run, once it has one: `/livez` names it (`RUN_HEADER`). */
  run: string | undefined;

  constructor(host: SandboxHost, dir: string, log: Logger) {
    this.#host = host;
    this.#dir = dir;
    this.#log = log;
  }

  /** Run the self-test, once: resolves with whether it passed. */
  selfTest(): Promise<boolean> {
    return (this.#selfTest ??= this.#runSelfTest().then(
      () => {
        this.#passed = true;
        return true;
      },
      (err: unknown) => {
        this.#log.warn({ err }, 'readiness self-test failed: this server cannot start a sandbox');
        return false;
      },
    ));
  }

  /** Whether it takes starts now (the self-test is started by the first question). */
  get ready(): boolean {
    if (!this.#selfTest) void this.selfTest();
    return (
      this.#passed &&
      !this.#joining &&
      !this.#draining &&
      !this.#closing &&
      !this.#lost &&
      !this.#host.refusal
    );
  }

  /** A cluster node listens before it joins (others probe its URL then): not ready until `joined`. */
  joining(): void {
    this.#joining = true;
  }

  joined(): void {
    this.#joining = false;
  }

  /** Whether a restart would not help: false only once `lost()` was called. */
  get alive(): boolean {
    return !this.#lost;
  }

  /**
   * This cluster node lost its place for good (declared lost by the others, or its name taken
   * by another run): it can never renew its lease again, so only a restart brings it back, and
   * liveness says so too.
   */
  lost(): void {
    this.#lost = true;
  }

  get draining(): boolean {
    return this.#draining;
  }

  /** A drain began: not ready from now on. */
  drain(): void {
    this.#draining = true;
  }

  closing(): void {
    this.#closing = true;
  }

  async #runSelfTest(): Promise<void> {
    if (this.#host.refusal) throw new Error(this.#host.refusal);
    // a name of its own: several servers in one process (tests, an embedding) share the pid that
    // names cgroups, and each runs its self-test
    const name = `readiness-self-test-${randomBytes(4).toString('hex')}`;
    const dir = join(this.#dir, name);
    await mkdir(dir, { recursive: true, mode: 0o700 });
    let sandbox: Sandbox | undefined;
    try {
      sandbox = await Sandbox.create(this.#host, {
        dir,
        name,
        log: this.#log,
        background: true,
      });
      const r = await sandbox.exec(['true'], { env: {}, timeoutMs: SELF_TEST_TIMEOUT_MS });
      if (r.code !== 0) throw new Error(`true exited ${String(r.code ?? r.signal)} in a sandbox`);
    } finally {
      await sandbox?.stop();
      await rm(dir, { recursive: true, force: true });
    }
  }
}

/** The answers of `/livez` and `/readyz` (status and a one-word body), or undefined for other paths. */
export function healthAnswer(
  health: Health | undefined,
  method: string | undefined,
  url: string | undefined,
): { status: number; body: string; run?: string } | undefined {
  if (method !== 'GET' && method !== 'HEAD') return undefined;
  const path = (url ?? '').split('?', 1)[0]!;
  if (!HEALTH_PATHS.has(path)) return undefined;
  if (path === '/livez') {
    const run = health?.run !== undefined ? { run: health.run } : {};
    return health?.alive === false
      ? { status: 503, body: 'lost\n', ...run }
      : { status: 200, body: 'ok\n', ...run };
  }
  return health?.ready ? { status: 200, body: 'ok\n' } : { status: 503, body: 'not ready\n' };
}
