/**
 * The programs instances are made of, which instance type needs which, and the Debian package
 * that provides each. `burrow doctor` prints them, `burrow serve` logs them at start, and
 * `POST /v1/start` answers 503 `instance_requirements_missing` naming what is missing and the
 * `apt-get` line that fixes it, before anything of the instance exists. The sandbox's own tools
 * (bubblewrap, util-linux, iproute2) are checked by the sandbox layer (sandbox/support.ts).
 * scripts/setup.sh installs the same packages; test/e2e/first-run.test.ts keeps them in step.
 */
import { spawn } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import type { RunnableInstanceType } from '../../api/index.js';
import { DEFAULT_PROGRAMS } from '../config.js';

export type RequirementType = RunnableInstanceType;

export interface Requirement {
  /** What it is, e.g. `Chromium`. */
  readonly name: string;
  /** The Debian package(s) that provide it. */
  readonly packages: readonly string[];
  /** What it is for, in a few words. */
  readonly neededFor: string;
  /** Instance types that do not start without it. */
  readonly types: readonly RequirementType[];
  /** The environment variable that points burrow at another copy, if any. */
  readonly env?: string;
  /** Where burrow looks for it (the first of these that is executable counts). */
  readonly paths: readonly string[];
  /** For the kernel: the Python modules that must import. */
  readonly pythonModules?: readonly string[];
}

/** Where the programs are, when not in their default places (src/server/config.ts). */
export interface RequirementOptions {
  /** The server's Chromium (`chromiumPath`, `BURROW_CHROMIUM`). */
  chromiumPath?: string | undefined;
  /** Xvfb (`xvfbPath`, `BURROW_XVFB`). */
  xvfbPath?: string | undefined;
  /** x11vnc (`x11vncPath`, `BURROW_X11VNC`). */
  x11vncPath?: string | undefined;
}

/** Every program an instance type needs, in the order doctor prints them. */
export function requirements(opts: RequirementOptions = {}): Requirement[] {
  return [
    {
      name: 'Chromium',
      packages: ['chromium'],
      neededFor: 'browser instances and the desktop browser of ubuntu instances',
      types: ['browser'],
      env: 'BURROW_CHROMIUM',
      paths: [opts.chromiumPath ?? DEFAULT_PROGRAMS.chromium],
    },
    {
      name: 'Xvfb',
      packages: ['xvfb'],
      neededFor: 'the display of ubuntu instances',
      types: ['ubuntu'],
      env: 'BURROW_XVFB',
      paths: [opts.xvfbPath ?? DEFAULT_PROGRAMS.xvfb],
    },
    {
      name: 'xdotool',
      packages: ['xdotool'],
      neededFor: 'mouse and keyboard actions on ubuntu instances',
      types: ['ubuntu'],
      paths: ['/usr/bin/xdotool'],
    },
    {
      name: 'x11vnc',
      packages: ['x11vnc'],
      neededFor: 'the live view of ubuntu instances',
      types: ['ubuntu'],
      env: 'BURROW_X11VNC',
      paths: [opts.x11vncPath ?? DEFAULT_PROGRAMS.x11vnc],
    },
    {
      name: 'Python with ipykernel and jupyter_client',
      packages: ['python3-ipykernel', 'python3-jupyter-client'],
      neededFor: 'code execution and notebooks on ubuntu instances',
      types: ['ubuntu'],
      paths: ['/usr/bin/python3'],
      pythonModules: ['ipykernel', 'jupyter_client'],
    },
    {
      name: 'ffmpeg',
      packages: ['ffmpeg'],
      neededFor: 'recordings of instance screens',
      types: [],
      paths: ['/usr/bin/ffmpeg'],
    },
  ];
}

function executable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** Python answers for its modules: positive answers are kept, negative ones for 30 s. */
const pythonAnswers = new Map<string, { ok: boolean; at: number }>();
const NEGATIVE_TTL_MS = 30_000;

function pythonImports(python: string, modules: readonly string[]): Promise<boolean> {
  const key = `${python}\0${modules.join(',')}`;
  const known = pythonAnswers.get(key);
  if (known && (known.ok || Date.now() - known.at < NEGATIVE_TTL_MS)) {
    return Promise.resolve(known.ok);
  }
  return new Promise((resolve) => {
    const child = spawn(python, ['-I', '-c', `import ${modules.join(', ')}`], {
      stdio: 'ignore',
      timeout: 20_000,
    });
    const done = (ok: boolean) => {
      pythonAnswers.set(key, { ok, at: Date.now() });
      resolve(ok);
    };
    child.once('error', () => done(false));
    child.once('exit', (code) => done(code === 0));
  });
}

/** Whether `r` is installed where burrow looks for it. */
export async function present(r: Requirement): Promise<boolean> {
  const path = r.paths.find(executable);
  if (path === undefined) return false;
  return r.pythonModules ? pythonImports(path, r.pythonModules) : true;
}

/** The `apt-get install` line for the packages of `missing`. */
export function aptLine(missing: readonly Requirement[]): string {
  return `apt-get install -y ${[...new Set(missing.flatMap((r) => r.packages))].join(' ')}`;
}

/** What `type` needs and this machine lacks. */
export async function missingFor(
  type: string,
  opts: RequirementOptions = {},
): Promise<Requirement[]> {
  const needed = requirements(opts).filter((r) => (r.types as readonly string[]).includes(type));
  const ok = await Promise.all(needed.map(present));
  return needed.filter((_, i) => !ok[i]);
}

/**
 * The 503's `detail` for a start refused because `missing` is not installed, e.g. "browser
 * instances need Chromium (looked for /usr/lib/chromium/chromium), which is not installed on
 * this server: run `apt-get install -y chromium` as root (or set BURROW_CHROMIUM)".
 */
export function missingDetail(type: string, missing: readonly Requirement[]): string {
  const what = missing.map((r) => `${r.name} (looked for ${r.paths.join(', ')})`).join(', ');
  const envs = missing.flatMap((r) => (r.env ? [r.env] : []));
  const alt = envs.length ? ` (or point ${envs.join(', ')} at a copy)` : '';
  const verb = missing.length === 1 ? 'which is' : 'which are';
  return `${type} instances need ${what}, ${verb} not installed on this server: run \`${aptLine(missing)}\` as root${alt}; \`burrow doctor\` lists everything`;
}

/** The refusal for a start of `type`, or undefined when everything it needs is here. */
export async function startRefusal(
  type: string,
  opts: RequirementOptions = {},
): Promise<string | undefined> {
  const missing = await missingFor(type, opts);
  return missing.length ? missingDetail(type, missing) : undefined;
}

/**
 * The 503's `detail` when the desktop browser of an ubuntu instance cannot start because
 * Chromium is missing; undefined when `chromiumPath` is there.
 */
export function chromiumRefusal(chromiumPath: string): string | undefined {
  if (executable(chromiumPath)) return undefined;
  const [chromium] = requirements({ chromiumPath });
  return missingDetail('the desktop browser of ubuntu', [chromium!]).replace(
    'the desktop browser of ubuntu instances need',
    'the desktop browser of ubuntu instances needs',
  );
}
