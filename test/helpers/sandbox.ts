/** The server-wide sandbox layer for tests that build runtimes without a server. */
import { SandboxHost } from '../../src/server/sandbox/index.js';
import type { Logger } from '../../src/server/instances/runtime.js';

const quiet: Logger = { info() {}, warn() {}, error() {}, debug() {} };

/** A SandboxHost for a test run (`runDir` named `run-<pid>-<tag>`, as the server names its own). */
export function testSandboxHost(
  runDir: string,
  opts: { disableIsolation?: boolean; log?: Logger } = {},
): Promise<SandboxHost> {
  return SandboxHost.create({
    runDir,
    log: opts.log ?? quiet,
    ...(opts.disableIsolation && { disableIsolation: true }),
  });
}
