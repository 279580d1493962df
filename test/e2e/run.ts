/** Runs a command in the repository as a child process and collects what it printed. */
import { spawn } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

export interface Run {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** `node <args>` in the repository root, with `env` over this process's environment. */
export function node(args: string[], env: Record<string, string | undefined> = {}): Promise<Run> {
  const child = spawn(process.execPath, args, {
    cwd: root,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += String(d)));
  child.stderr.on('data', (d: Buffer) => (stderr += String(d)));
  return new Promise((done, fail) => {
    child.on('error', fail);
    child.on('close', (code, signal) => done({ code, signal, stdout, stderr }));
  });
}

/** The environment for the embedded server: no remote endpoint, this data dir. */
export const embeddedEnv = (dataDir: string) => ({
  BURROW_BASE_URL: undefined,
  BURROW_API_KEY: undefined,
  BURROW_DATA_DIR: dataDir,
});

/** `burrow <args>` from the sources, with no server configured and `dataDir` (`env` over it). */
export const burrowCli = (
  args: string[],
  dataDir: string,
  env: Record<string, string | undefined> = {},
): Promise<Run> =>
  node(['--import', 'tsx', 'src/cli/main.ts', ...args], { ...embeddedEnv(dataDir), ...env });

/**
 * `node <args>` with the embedded server on `dataDir` (`env` over it), noting meanwhile the pid of
 * every embedded server of the run: while it lives, a server keeps `instances/run-<pid>-…` in its
 * data dir, and its instances' processes are in cgroups named after that pid (`instanceProcesses`).
 */
export async function nodeEmbedded(
  args: string[],
  dataDir: string,
  env: Record<string, string | undefined> = {},
): Promise<Run & { serverPids: number[] }> {
  const pids = new Set<number>();
  const note = () => {
    try {
      for (const name of readdirSync(join(dataDir, 'instances'))) {
        const pid = /^run-(\d+)-/.exec(name)?.[1];
        if (pid) pids.add(Number(pid));
      }
    } catch {
      /* no server yet */
    }
  };
  // a server lives at least as long as an instance takes to start: 25 ms polls see every one
  const timer = setInterval(note, 25);
  try {
    const run = await node(args, { ...embeddedEnv(dataDir), ...env });
    note();
    return { ...run, serverPids: [...pids] };
  } finally {
    clearInterval(timer);
  }
}
