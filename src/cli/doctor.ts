/**
 * `burrow doctor`: what this machine has for burrow, what is missing, which isolation guarantees
 * (identity, limits, disk quota, egress, ...) it gives instances, and the command that fixes each
 * gap. `burrow serve` prints the same report at start (`report` + `formatSummary`).
 */
import { existsSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { INSTANCE_TYPES, type RunnableInstanceType } from '../api/index.js';
import { programPaths, type ServerOptions } from '../server/config.js';
import { aptLine, present, requirements, type Requirement } from '../server/host/requirements.js';
import {
  CORE_GUARANTEES,
  hostSupport,
  type Guarantee,
  type PrivilegeLevel,
} from '../server/sandbox/index.js';

export const usage = `burrow doctor [--json]

Checks the programs burrow runs (Chromium, Xvfb, xdotool, x11vnc, the kernel's Python, ffmpeg,
the sandbox tools), which isolation guarantees this machine gives instances, and prints the
command that fixes each gap. Exit status 1 when an instance type cannot start here.`;

export interface ProgramCheck {
  name: string;
  needed_for: string;
  ok: boolean;
  /** Where it was looked for. */
  paths: string[];
  /** The command that installs it, when missing. */
  fix?: string;
}

/** A row of the isolation table: the sandbox's own guarantee, as its probe found it. */
export type GuaranteeCheck = Guarantee;

export interface DoctorReport {
  root: boolean;
  /** The privilege level the server would run at (`root`, `container-root`, `unprivileged`). */
  level: PrivilegeLevel;
  programs: ProgramCheck[];
  isolation: GuaranteeCheck[];
  /** Per instance type: whether it can start here, and what stops it. */
  instance_types: Record<RunnableInstanceType, { ready: boolean; missing: string[] }>;
  /** One command installing every missing package (run as root), if any is missing. */
  fix?: string;
}

/** The sandbox's own tools (sandbox/support.ts checks them too, as part of `identity`). */
const SANDBOX_TOOLS: Requirement[] = [
  {
    name: 'bubblewrap',
    packages: ['bubblewrap'],
    neededFor: 'the sandbox of every instance',
    types: INSTANCE_TYPES,
    paths: ['/usr/bin/bwrap', '/bin/bwrap'],
  },
  {
    name: 'nsenter, unshare, setpriv',
    packages: ['util-linux'],
    neededFor: 'the sandbox of every instance',
    types: INSTANCE_TYPES,
    paths: ['/usr/bin/setpriv', '/bin/setpriv'],
  },
  {
    name: 'ip',
    packages: ['iproute2'],
    neededFor: 'the network of every instance',
    types: INSTANCE_TYPES,
    paths: ['/usr/sbin/ip', '/sbin/ip', '/usr/bin/ip', '/bin/ip'],
  },
  {
    name: 'mkfs.ext4',
    packages: ['e2fsprogs'],
    neededFor: 'disk quotas',
    types: [],
    paths: ['/usr/sbin/mkfs.ext4', '/sbin/mkfs.ext4'],
  },
];

const sandboxToolPresent = (r: Requirement) =>
  r.name.includes('setpriv')
    ? ['nsenter', 'unshare', 'setpriv'].every((t) =>
        ['/usr/bin', '/bin'].some((d) => existsSync(`${d}/${t}`)),
      )
    : r.paths.some((p) => existsSync(p));

/**
 * Probes the machine for a server given `options` (those of `burrow serve`) and `env`: the
 * programs where the server would look for them (src/server/config.ts).
 */
export async function report(
  options: Pick<ServerOptions, 'chromiumPath' | 'xvfbPath' | 'x11vncPath' | 'bwrapPath'> = {},
  env: NodeJS.ProcessEnv = process.env,
): Promise<DoctorReport> {
  const paths = programPaths(env, options);
  const programs = requirements({
    chromiumPath: paths.chromium,
    xvfbPath: paths.xvfb,
    x11vncPath: paths.x11vnc,
  });
  const okPrograms = await Promise.all(programs.map(present));
  const all = [...programs, ...SANDBOX_TOOLS];
  const ok = [...okPrograms, ...SANDBOX_TOOLS.map(sandboxToolPresent)];
  const checks: ProgramCheck[] = all.map((r, i) => ({
    name: r.name,
    needed_for: r.neededFor,
    ok: ok[i]!,
    paths: [...r.paths],
    ...(!ok[i] && { fix: aptLine([r]) }),
  }));
  const support = hostSupport(options.bwrapPath ?? (env.BURROW_BWRAP || undefined));
  const isolation = support.guarantees.map((g: Guarantee) => ({ ...g }));
  const coreGaps = isolation.filter((g) => !g.ok && CORE_GUARANTEES.includes(g.name));
  const typeStatus = (type: RunnableInstanceType) => {
    const missing = all.filter((r, i) => !ok[i] && r.types.includes(type)).map((r) => r.name);
    if (coreGaps.length > 0) missing.push(`isolation (${coreGaps.map((g) => g.name).join(', ')})`);
    return { ready: missing.length === 0, missing };
  };
  const missing = all.filter((_, i) => !ok[i]);
  return {
    root: support.root,
    level: support.level,
    programs: checks,
    isolation,
    instance_types: { browser: typeStatus('browser'), ubuntu: typeStatus('ubuntu') },
    ...(missing.length > 0 && { fix: aptLine(missing) }),
  };
}

const sudo = (root: boolean, cmd: string) => (root ? cmd : `sudo ${cmd}`);

/** The report as lines for a terminal. */
function formatReport(r: DoctorReport): string[] {
  const lines = ['programs:'];
  for (const p of r.programs) {
    lines.push(
      p.ok
        ? `  ok       ${p.name} (${p.needed_for})`
        : `  MISSING  ${p.name} (${p.needed_for}); looked for ${p.paths.join(', ')}; fix: ${sudo(r.root, p.fix!)}`,
    );
  }
  lines.push('', `isolation of instances (privilege level: ${r.level}):`);
  for (const g of r.isolation) {
    lines.push(
      g.ok
        ? `  ok       ${g.name}: ${g.what}${g.why ? ` (${g.why})` : ''}`
        : `  MISSING  ${g.name}${g.core ? ' (core)' : ''}: ${g.what}; why: ${g.why ?? 'unknown'}; fix: ${g.fix ?? 'see src/server/sandbox/ISOLATION.md'}`,
    );
  }
  lines.push('', 'instance types:');
  for (const [type, s] of Object.entries(r.instance_types)) {
    lines.push(
      s.ready
        ? `  ${type}: ready`
        : `  ${type}: cannot start here (missing ${s.missing.join('; ')})`,
    );
  }
  if (r.fix) lines.push('', `to install everything missing: ${sudo(r.root, r.fix)}`);
  return lines;
}

export async function run(argv: string[]): Promise<void> {
  const { values } = parseArgs({
    args: argv,
    options: { json: { type: 'boolean' }, help: { type: 'boolean', short: 'h' } },
  });
  if (values.help) {
    console.log(usage);
    return;
  }
  const r = await report();
  if (values.json) console.log(JSON.stringify(r, null, 2));
  else console.log(formatReport(r).join('\n'));
  if (!r.instance_types.browser.ready || !r.instance_types.ubuntu.ready) process.exitCode = 1;
}

/** The report in a few lines (what `burrow serve` prints at start): gaps in full, the rest named. */
export function formatSummary(r: DoctorReport): string[] {
  const lines: string[] = [];
  const okPrograms = r.programs.filter((p) => p.ok).map((p) => p.name);
  if (okPrograms.length) lines.push(`programs present: ${okPrograms.join(', ')}`);
  for (const p of r.programs.filter((x) => !x.ok)) {
    lines.push(`MISSING ${p.name} (${p.needed_for}); fix: ${sudo(r.root, p.fix!)}`);
  }
  lines.push(`privilege level: ${r.level}`);
  const held = r.isolation.filter((g) => g.ok).map((g) => g.name);
  if (held.length) lines.push(`isolation guarantees that hold: ${held.join(', ')}`);
  for (const g of r.isolation.filter((x) => !x.ok)) {
    lines.push(
      `MISSING isolation guarantee ${g.name}${g.core ? ' (core)' : ''}: ${g.why ?? 'unknown'}; fix: ${g.fix ?? 'see burrow doctor'}`,
    );
  }
  const types = Object.entries(r.instance_types).map(([type, s]) =>
    s.ready ? `${type} ready` : `${type} cannot start (missing ${s.missing.join('; ')})`,
  );
  lines.push(`instance types: ${types.join(', ')}`);
  return lines;
}
