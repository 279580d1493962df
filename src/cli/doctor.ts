/**
 * `burrow doctor`: what this machine has for burrow, what is missing, which isolation guarantees
 * hold, and the command that fixes each gap.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { describeSupport, hostSupport } from '../server/sandbox/index.js';

export const usage = `burrow doctor [--json]

Checks the programs burrow runs (Chromium, Xvfb, xdotool, x11vnc, Jupyter, the sandbox tools)
and which isolation guarantees this machine gives instances. Exit status 1 when something an
instance type needs is missing.`;

interface Check {
  name: string;
  needed_for: string;
  ok: boolean;
  fix?: string;
}

const chromium = process.env.BURROW_CHROMIUM ?? '/usr/lib/chromium/chromium';

function has(path: string): boolean {
  return existsSync(path);
}

function pythonHasKernel(): boolean {
  const r = spawnSync('/usr/bin/python3', ['-c', 'import ipykernel, jupyter_client'], {
    stdio: 'ignore',
    timeout: 20_000,
  });
  return r.status === 0;
}

export function checks(): Check[] {
  const apt = (pkgs: string) => `apt-get install -y ${pkgs}`;
  const c = (name: string, neededFor: string, ok: boolean, fix: string): Check =>
    ok ? { name, needed_for: neededFor, ok } : { name, needed_for: neededFor, ok, fix };
  return [
    c('chromium', 'browser instances, the ubuntu desktop browser', has(chromium), apt('chromium')),
    c('Xvfb', 'ubuntu instances', has('/usr/bin/Xvfb'), apt('xvfb')),
    c('xdotool', 'ubuntu computer actions', has('/usr/bin/xdotool'), apt('xdotool')),
    c('x11vnc', 'ubuntu live view', has('/usr/bin/x11vnc'), apt('x11vnc')),
    c(
      'python3 with ipykernel',
      'code execution and notebooks',
      has('/usr/bin/python3') && pythonHasKernel(),
      apt('python3-ipykernel python3-jupyter-client'),
    ),
    c('bubblewrap', 'every instance (sandbox)', has('/usr/bin/bwrap'), apt('bubblewrap')),
    c(
      'util-linux (nsenter, unshare, setpriv)',
      'every instance (sandbox)',
      ['/usr/bin/nsenter', '/usr/bin/unshare', '/usr/bin/setpriv'].every(has),
      apt('util-linux'),
    ),
    c(
      'iproute2',
      'every instance (its network)',
      has('/usr/sbin/ip') || has('/sbin/ip'),
      apt('iproute2'),
    ),
    c(
      'mkfs.ext4',
      'disk quotas',
      has('/usr/sbin/mkfs.ext4') || has('/sbin/mkfs.ext4'),
      apt('e2fsprogs'),
    ),
  ];
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
  const list = checks();
  const support = hostSupport();
  if (values.json) {
    console.log(JSON.stringify({ programs: list, isolation: support.guarantees }, null, 2));
  } else {
    console.log('programs:');
    for (const k of list) {
      console.log(
        `  ${k.ok ? 'ok     ' : 'MISSING'}  ${k.name} (${k.needed_for})${k.ok ? '' : ` — ${k.fix}`}`,
      );
    }
    console.log('\nisolation of instances:');
    for (const line of describeSupport(support)) console.log(`  ${line}`);
    const missing = [
      ...new Set(list.filter((k) => !k.ok).map((k) => k.fix!.replace('apt-get install -y ', ''))),
    ];
    if (missing.length > 0) {
      const pkgs = missing.join(' ');
      const cmd = `apt-get install -y ${pkgs}`;
      console.log(`\nto fix: ${process.getuid?.() === 0 ? cmd : `sudo ${cmd}`}`);
    }
  }
  if (list.some((k) => !k.ok) || !support.sandbox) process.exitCode = 1;
}
