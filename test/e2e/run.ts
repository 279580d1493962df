/** Runs a command in the repository as a child process and collects what it printed. */
import { spawn } from 'node:child_process';
import { dirname, resolve } from 'node:path';
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
