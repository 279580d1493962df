/**
 * The sandbox layer both instance types build on: what makes an instance a machine of its own
 * (ISOLATION.md in this folder is the threat model).
 */
export {
  BROWSER_STDIO,
  Sandbox,
  SANDBOX_HOME,
  SANDBOX_PATH,
  describeExit,
  type ExecResult,
  type SandboxLimits,
  type SandboxMode,
  type SandboxOptions,
  type SandboxSpawn,
  type SpawnOptions,
} from './sandbox.js';
export {
  DEFAULT_LIMITS,
  SandboxHost,
  type SandboxHostOptions,
  type SandboxResourceLimits,
} from './host.js';
export { connectInside, type ConnectSandbox } from './connect.js';
export {
  CORE_GUARANTEES,
  describeSupport,
  hostSupport,
  type Guarantee,
  type HostSupport,
  type PrivilegeLevel,
} from './support.js';
export { buildSeccompFilter, DENIED_SYSCALLS } from './seccomp.js';
export {
  chromiumProxyArgs,
  EGRESS_PROXY,
  hostLoopbackAllowed,
  isLoopbackUrl,
  openEgress,
  proxyEnv,
  type InstanceEgress,
  type NavigationRefusal,
} from './network.js';
export { probeUpstream, type UpstreamProbeFailure } from './network.js';
export {
  upstreamFromSettings,
  upstreamLabel,
  type UpstreamProxy,
  type UpstreamSettings,
} from './egress/upstream.js';
export { SandboxStock, type SandboxStockOptions } from './stock.js';
