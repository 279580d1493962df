/**
 * A process started ahead (`Sandbox.prepareSpawn`): the chain of the first process an instance
 * will run, started before any start asked for it (a sandbox made ahead, stock.ts), waiting in a
 * perl step inside for its command (`LAUNCH_STEP`). The first spawn of its shape then costs a write
 * instead of the chain's ~12 ms of process starts and the server's own fork (~5 ms, more as its
 * memory grows); a first spawn of another shape, or the sandbox's stop, ends it unused. It runs
 * nobody's code until then.
 */
import type { StdioOptions } from 'node:child_process';
import type { Writable } from 'node:stream';
import { raceDeadline } from '../../internal/deadline.js';
import type { Supervised } from '../../internal/process.js';

/**
 * The last step of a chain started ahead: read the command from the descriptor named (argument
 * count, the arguments, then name and value of each variable, every field ended by a NUL) until
 * the server closes it, close it, and become the command with exactly that environment plus the
 * `BURROW_INSTANCE` bubblewrap set. Nothing to read (the server discarded it) exits 0. Built-ins
 * only: no module to load.
 */
export const LAUNCH_STEP =
  'open(my $in, "<&=", 0 + shift) or exit 125; my $m = do { local $/; <$in> }; close($in); ' +
  'exit 0 unless defined $m && length $m; my @f = split(/\\0/, $m, -1); pop @f; ' +
  'my $n = shift @f; my @argv = splice(@f, 0, $n); my %env = @f; ' +
  '$env{BURROW_INSTANCE} = $ENV{BURROW_INSTANCE}; %ENV = %env; exec { $argv[0] } @argv; exit 127';

/** How long a stop gives a process started ahead and never used to end by itself. */
const PREPARED_EXIT_MS = 1000;

/** A process started ahead, waiting for its command. */
interface Prepared {
  proc: Supervised;
  stdio: readonly string[];
  /** Where its command goes: the server's end of the launch step's descriptor. */
  command: Writable;
}

/** The one process a sandbox holds started ahead, if any. */
export class SpawnAhead {
  #prepared: Prepared | undefined;

  /** Whether one was started and is still waiting. */
  get waiting(): boolean {
    return this.#prepared !== undefined;
  }

  /**
   * Start it with `stdio` through `spawn` (a spawn inside, in home, with nothing of the server's
   * environment), running `LAUNCH_STEP` with `perl`.
   */
  start(
    stdio: readonly ('ignore' | 'pipe')[],
    perl: string,
    spawn: (argv: readonly string[], stdio: StdioOptions) => Supervised,
  ): Supervised {
    const at = stdio.length;
    const proc = spawn([perl, '-e', LAUNCH_STEP, String(at)], [...stdio, 'pipe']);
    const command = proc.child.stdio[at] as Writable;
    command.on('error', () => {});
    this.#prepared = { proc, stdio, command };
    void proc.exited.then(() => {
      if (this.#prepared?.proc === proc) this.#prepared = undefined;
    });
    return proc;
  }

  /**
   * Make it the command `argv` with exactly `env`, if it is still there and fits a spawn with
   * `stdio` in home (`inHome`); else end it unused and answer undefined.
   */
  launch(
    argv: readonly string[],
    env: Record<string, string>,
    stdio: StdioOptions,
    inHome: boolean,
  ): Supervised | undefined {
    const prepared = this.#prepared;
    if (!prepared) return undefined;
    this.#prepared = undefined;
    const fits =
      Array.isArray(stdio) &&
      stdio.length === prepared.stdio.length &&
      stdio.every((s, i) => s === prepared.stdio[i]) &&
      inHome &&
      prepared.proc.running;
    if (!fits) {
      prepared.command.end(); // nothing to read: it exits
      return undefined;
    }
    let message: Buffer;
    try {
      message = launchMessage(argv, env);
    } catch (err) {
      prepared.command.end(); // it exits unused
      throw err;
    }
    prepared.command.end(message);
    return prepared.proc;
  }

  /**
   * End it unused (the sandbox stops): it ends by itself once its descriptor closes, reaped by its
   * wrapper; killed with its wrapper, it would be left to the host's init to reap.
   */
  async end(): Promise<void> {
    const prepared = this.#prepared;
    this.#prepared = undefined;
    if (!prepared) return;
    prepared.command.end();
    await raceDeadline(prepared.proc.exited, PREPARED_EXIT_MS);
  }
}

/** The command for `LAUNCH_STEP`: every field NUL-ended (a NUL cannot be in one). */
function launchMessage(argv: readonly string[], env: Record<string, string>): Buffer {
  const fields = [String(argv.length), ...argv, ...Object.entries(env).flat()];
  if (fields.some((f) => f.includes('\0'))) throw new Error('spawn: a NUL in an argument');
  return Buffer.from(fields.map((f) => `${f}\0`).join(''));
}
