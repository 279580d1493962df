/**
 * Persistent bash sessions.
 *
 * Each session is one `bash --noprofile --norc` in the sandbox reading its commands from a pipe
 * (fd 0). A command is sent as one line:
 *
 *     eval '<command>' </dev/null 3>&- 7>&- 8>&-; __burrow_done $?
 *
 * so it runs in the shell itself (`cd`, `export`, functions persist) with stdin from /dev/null
 * (a command reading stdin cannot swallow the next one) and without the control fds. Completion
 * is out of band: `__burrow_done` writes the exit status to fd 3 (a separate pipe), then reads a
 * random sync token from fd 0 that the server sends only *after* the status arrived, and prints
 * it to the original stdout (fd 7) and stderr (fd 8). Everything before the token on each pipe is
 * the command's output; what comes after it while no command runs (a background process still
 * writing) is nobody's, and so is the rest of a call answered at its sync grace before its token
 * came: dropped, counted in the next answer's `system`, never part of the next call's output. The token does not exist while the command runs, so no output can fake
 * it; SIGINT/TERM/HUP/QUIT sent to the shell are trapped, so `kill -INT $$` does not end it.
 *
 * The status pipe is not secret from the command: `eval`'s redirections make bash keep copies of
 * the fds it closes (numbered 10 and up) for restoring them, and a builtin can write to those. So
 * the server trusts nothing on it: it holds at most one short line, accepts only an exit status
 * (`0`-`255`) while a command runs and none is being synced, and anything else (more bytes, a
 * line that is no status, a status nobody waits for) ends the shell. A command can thereby lie
 * about its own completion or end its own session, nothing more.
 *
 * Reported per call: stdout in `output`, stderr in `error`, notices in `system` (`session N:
 * exit status S`, still running, truncation). Each call returns at most OUTPUT_CAP bytes of stdout
 * and of stderr (first and last halves, the middle replaced by an omission line); the session
 * keeps draining its pipes, so nothing blocks.
 */
import { randomBytes } from 'node:crypto';
import type { Readable, Writable } from 'node:stream';
import type { BashRequest, ToolResult } from '../../../api/index.js';
import { raceDeadline, TIMED_OUT } from '../../../internal/deadline.js';
import type { Supervised } from '../../../internal/process.js';
import { reportFailure, ToolFailure } from '../../computer/failure.js';
import { envDiff, shellQuote, type InstanceEnv } from './env.js';
import type { Sandbox } from '../../sandbox/index.js';
import { Capture, OUTPUT_CAP, SyncScanner } from './bash-capture.js';

export { Capture, OUTPUT_CAP };
/** Default `timeout` of a bash call, seconds. */
export const DEFAULT_TIMEOUT_S = 10;
/** Most sessions one instance may have at once. */
export const MAX_SESSIONS = 16;
const SYNC_GRACE_MS = 5_000;
/** One line of the status pipe: an exit status, nothing else. */
const STATUS_LINE = /^(?:25[0-5]|2[0-4]\d|1?\d?\d)$/;
/** Bytes the status pipe may hold without a newline ("255" is the longest status). */
const MAX_STATUS_BYTES = 3;

const INIT = `exec 7>&1 8>&2
trap ':' INT TERM HUP QUIT
__burrow_done() {
  local __burrow_status=$1 __burrow_sync
  # called from a command (fd 3 is closed there): do nothing
  { builtin printf '%s\\n' "$__burrow_status" >&3; } 2>/dev/null || return "$__burrow_status"
  until IFS= builtin read -r __burrow_sync; do [ $? -gt 128 ] || return "$__burrow_status"; done
  builtin printf '%s' "$__burrow_sync" >&7
  builtin printf '%s' "$__burrow_sync" >&8
  return "$__burrow_status"
}
__burrow_ret() { return "$1"; }
for __burrow_fd in /proc/$$/fd/*; do
  case "\${__burrow_fd##*/}" in 0|1|2|3|7|8|255) ;; *) eval "exec \${__burrow_fd##*/}>&-" 2>/dev/null ;; esac
done
unset __burrow_fd
`;

interface Completion {
  /** Exit status of the command (or of the shell, when it exited). */
  status: number;
  /** The shell itself ended. */
  shellExited: boolean;
}

class BashSession {
  readonly out = new Capture();
  readonly err = new Capture();
  /** What the shell's environment was last brought to. */
  env: Record<string, string>;
  /** A command is running. */
  busy = false;
  startedAt = 0;
  /** The running command's call returned at its timeout; check_session reports the rest. */
  detached = false;
  /** A command that finished after its call had returned, not yet reported. */
  finished: Completion | undefined;
  /** The shell exited. */
  dead: Completion | undefined;
  #current: ((c: Completion) => void) | undefined;
  #status = '';
  #sync: { out: SyncScanner; err: SyncScanner; timer: NodeJS.Timeout } | undefined;
  /**
   * Scanners of a call answered at its sync grace before its token came: the rest of its output
   * is dropped up to the token, so that it never lands in the next call's answer.
   */
  readonly #drains: { out?: SyncScanner | undefined; err?: SyncScanner | undefined } = {};
  /** Bytes written while no command ran (background processes), dropped since the last report. */
  stray = 0;
  #statusCode = 0;
  #statusPipe: Readable | undefined;
  readonly #stdin: Writable;

  constructor(
    readonly id: number,
    readonly proc: Supervised,
    env: Record<string, string>,
    onExit: (s: BashSession) => void,
    readonly terminate: () => Promise<void>,
  ) {
    this.env = env;
    const [stdin, stdout, stderr, status] = proc.child.stdio as unknown as [
      Writable,
      Readable,
      Readable,
      Readable,
    ];
    this.#stdin = stdin;
    stdin.on('error', () => {
      /* EPIPE after the shell died; the exit handler reports it */
    });
    stdout.on('data', (c: Buffer) => this.#data('out', c));
    stderr.on('data', (c: Buffer) => this.#data('err', c));
    status.on('data', (c: Buffer) => this.#onStatus(c.toString('latin1')));
    this.#statusPipe = status;
    void proc.exited.then(async (e) => {
      // a background process may hold the pipes open: give them a moment, not forever
      await raceDeadline(Promise.all([ended(stdout), ended(stderr)]), 200);
      this.#sync?.out.flush();
      this.#sync?.err.flush();
      const status = e.code ?? 128 + signalNumber(e.signal);
      this.dead = { status, shellExited: true };
      this.#complete(this.dead);
      onExit(this);
    });
    stdin.write(INIT);
  }

  /** Send a command; resolve when it completes (or never, if the shell hangs). */
  start(command: string, env: Record<string, string>): Promise<Completion> {
    this.busy = true;
    this.detached = false;
    this.startedAt = Date.now();
    this.finished = undefined;
    const done = new Promise<Completion>((resolve) => (this.#current = resolve));
    const diff = envDiff(this.env, env);
    this.env = env;
    const prelude = diff ? `__burrow_s=$?; ${diff}; __burrow_ret "$__burrow_s"; ` : '';
    const body = command.replaceAll('\0', '');
    this.#stdin.write(
      `${prelude}eval ${shellQuote(body)} </dev/null 3>&- 7>&- 8>&-; __burrow_done $?\n`,
    );
    return done;
  }

  #onStatus(text: string): void {
    if (this.#statusPipe === undefined) return; // the channel was broken: ignored till the end
    this.#status += text;
    let nl: number;
    while ((nl = this.#status.indexOf('\n')) >= 0) {
      const line = this.#status.slice(0, nl);
      this.#status = this.#status.slice(nl + 1);
      if (!STATUS_LINE.test(line) || !this.busy || this.#sync) return this.#broken();
      this.#statusCode = Number(line);
      const token = randomBytes(16).toString('hex');
      const tokenBuf = Buffer.from(token);
      const timer = setTimeout(() => this.#synced(), SYNC_GRACE_MS); // safety net: never wait forever
      const onFound = () => {
        if (this.#sync?.out.found && this.#sync.err.found) this.#synced();
      };
      this.#sync = {
        out: new SyncScanner(tokenBuf, this.out, onFound, (b) => this.#boundary('out', b)),
        err: new SyncScanner(tokenBuf, this.err, onFound, (b) => this.#boundary('err', b)),
        timer,
      };
      this.#stdin.write(`${token}\n`);
    }
    if (this.#status.length > MAX_STATUS_BYTES) this.#broken();
  }

  /**
   * Something other than the shell's own `__burrow_done` wrote to the status pipe: the session
   * cannot be believed any more. Stop reading it and end the shell; its exit completes the call.
   */
  #broken(): void {
    const sync = this.#sync;
    if (sync) {
      // no completion from this pipe any more: the call ends with the shell's exit
      clearTimeout(sync.timer);
      sync.out.flush();
      sync.err.flush();
      this.#sync = undefined;
    }
    this.#statusPipe?.destroy();
    this.#statusPipe = undefined;
    this.#status = '';
    void this.terminate();
  }

  /**
   * Output of one pipe: the call's while a command runs, up to its sync token; dropped between
   * calls (a background process still writing), and so is the rest of a call already answered.
   */
  #data(pipe: 'out' | 'err', chunk: Buffer): void {
    const scanner = this.#sync?.[pipe] ?? this.#drains[pipe];
    if (scanner) return scanner.push(chunk);
    this.#boundary(pipe, chunk);
  }

  /** Bytes after a call's token: the next command's if it runs already, else nobody's. */
  #boundary(pipe: 'out' | 'err', bytes: Buffer): void {
    if (this.#drains[pipe]?.found) this.#drains[pipe] = undefined;
    if (this.#drains[pipe] || this.#sync || !this.busy) this.stray += bytes.length;
    else this[pipe].push(bytes);
  }

  /** Both pipes delivered the token (or the grace timer fired): the command is complete. */
  #synced(): void {
    const sync = this.#sync;
    if (!sync) return;
    clearTimeout(sync.timer);
    for (const pipe of ['out', 'err'] as const) {
      if (sync[pipe].found) continue;
      // what is still on its way is the answered call's: dropped up to its token
      sync[pipe].flush();
      sync[pipe].draining = true;
      this.#drains[pipe] = sync[pipe];
    }
    this.#sync = undefined;
    this.#complete({ status: this.#statusCode, shellExited: false });
  }

  #complete(c: Completion): void {
    if (!this.busy) return;
    this.busy = false;
    const resolve = this.#current;
    this.#current = undefined;
    if (resolve) resolve(c);
  }
}

export class BashSessions {
  readonly #sessions = new Map<number, BashSession>();

  constructor(
    readonly sandbox: Sandbox,
    readonly env: InstanceEnv,
  ) {}

  handle(req: BashRequest): Promise<ToolResult> {
    return reportFailure(() => this.#handle(req));
  }

  async #handle(req: BashRequest): Promise<ToolResult> {
    if (req.list_sessions) return this.#list();
    if (req.check_session !== undefined) return this.#check(req.check_session);
    const notes: string[] = [];
    if (req.restart) {
      notes.push(await this.#restart(req.session));
      if (req.command === undefined) return { output: '', system: notes.join('\n') };
    }
    if (req.command === undefined) {
      return {
        error:
          'No command given: send `command`, or `restart`, `list_sessions` or `check_session`.',
      };
    }
    let session: BashSession;
    if (req.session !== undefined) {
      let existing = this.#sessions.get(req.session);
      if (existing?.dead) {
        // its shell exited after its call had returned: hand over what was not reported yet
        this.#sessions.delete(existing.id);
        const fresh = this.#create(existing.id);
        fresh.out.push(Buffer.from(existing.out.take().text));
        fresh.err.push(Buffer.from(existing.err.take().text));
        fresh.finished = existing.finished;
        existing = fresh;
      }
      if (existing?.busy) {
        const secs = Math.round((Date.now() - existing.startedAt) / 1000);
        return {
          error: `Session ${req.session} is busy running a command (started ${secs} s ago); use check_session: ${req.session} to see it, or restart: true to replace the shell.`,
        };
      }
      session = existing ?? this.#create(req.session);
    } else {
      const idle = [...this.#sessions.values()]
        .filter((s) => !s.busy && !s.dead)
        .sort((a, b) => a.id - b.id)[0];
      session = idle ?? this.#create(this.#lowestFree());
    }
    return this.#run(session, req.command, (req.timeout ?? DEFAULT_TIMEOUT_S) * 1000, notes);
  }

  /** Start session 1's shell ahead of the first command (a warm-pool instance). */
  prewarm(): void {
    if (this.#sessions.size === 0) this.#create(1);
  }

  /** Kill every session (instance stop). */
  async stop(): Promise<void> {
    await Promise.all([...this.#sessions.values()].map((s) => this.sandbox.terminate(s.proc)));
    this.#sessions.clear();
  }

  #create(id: number): BashSession {
    if (this.#sessions.size >= MAX_SESSIONS) {
      throw new ToolFailure(
        `At most ${MAX_SESSIONS} bash sessions can run at once; restart or finish one first.`,
      );
    }
    const env = this.env.current();
    const proc = this.sandbox.spawn(['/bin/bash', '--noprofile', '--norc'], {
      env,
      stdio: ['pipe', 'pipe', 'pipe', 'pipe'],
    });
    const session = new BashSession(
      id,
      proc,
      env,
      (s) => {
        // keep a shell that exited unobserved until check_session has reported it
        if (this.#sessions.get(s.id) === s && !s.detached) this.#sessions.delete(s.id);
      },
      () => this.sandbox.terminate(proc),
    );
    this.#sessions.set(id, session);
    return session;
  }

  #lowestFree(): number {
    let n = 1;
    while (this.#sessions.has(n)) n++;
    return n;
  }

  async #run(
    session: BashSession,
    command: string,
    timeoutMs: number,
    notes: string[],
  ): Promise<ToolResult> {
    const earlier = session.finished;
    if (earlier)
      notes.push(
        `session ${session.id}: an earlier command finished with exit status ${earlier.status}; its unreported output comes first`,
      );
    const done = session.start(command, this.env.current());
    const completion = await raceDeadline(done, timeoutMs);
    if (completion === TIMED_OUT) {
      // keep syncing in the background; check_session reports the result
      session.detached = true;
      void done.then((c) => (session.finished = c));
      notes.push(
        `session ${session.id}: command still running after ${timeoutMs / 1000} s; the session stays busy until it finishes (use check_session: ${session.id})`,
      );
      return this.#report(session, notes);
    }
    notes.push(exitNote(session.id, completion));
    return this.#report(session, notes);
  }

  #report(session: BashSession, notes: string[]): ToolResult {
    const out = session.out.take();
    const err = session.err.take();
    const omitted = out.dropped + err.dropped;
    if (omitted > 0) {
      notes.push(
        `output truncated: ${omitted} bytes omitted (a call returns at most ${OUTPUT_CAP} bytes of stdout and of stderr)`,
      );
    }
    if (session.stray > 0) {
      notes.push(
        `session ${session.id}: ${session.stray} bytes written while no command ran (background processes) were dropped`,
      );
      session.stray = 0;
    }
    const result: ToolResult = { output: out.text };
    if (err.text) result.error = err.text;
    if (notes.length) result.system = notes.join('\n');
    return result;
  }

  #check(id: number): ToolResult {
    const session = this.#sessions.get(id);
    if (!session) return { error: `Session ${id} does not exist.` };
    if (session.busy) {
      const secs = Math.round((Date.now() - session.startedAt) / 1000);
      return this.#report(session, [`session ${id}: still running (${secs} s)`]);
    }
    const finished = session.finished;
    session.finished = undefined;
    if (session.dead) this.#sessions.delete(id);
    return this.#report(session, [finished ? exitNote(id, finished) : `session ${id}: idle`]);
  }

  #list(): ToolResult {
    const lines = [...this.#sessions.values()]
      .sort((a, b) => a.id - b.id)
      .map(
        (s) =>
          `${s.id}: ${s.busy ? `busy (${Math.round((Date.now() - s.startedAt) / 1000)} s)` : s.dead ? 'exited (use check_session)' : 'idle'}`,
      );
    return lines.length ? { output: lines.join('\n') } : { output: '', system: 'no bash sessions' };
  }

  async #restart(id: number | undefined): Promise<string> {
    const targets =
      id === undefined ? [...this.#sessions.values()] : [this.#sessions.get(id)].filter((s) => !!s);
    for (const s of targets) this.#sessions.delete(s.id);
    await Promise.all(targets.map((s) => this.sandbox.terminate(s.proc)));
    if (id !== undefined) {
      this.#create(id);
      return `session ${id}: restarted`;
    }
    return targets.length ? `all bash sessions restarted` : 'no bash sessions to restart';
  }
}

function exitNote(id: number, c: Completion): string {
  return c.shellExited
    ? `session ${id}: exit status ${c.status}; the shell exited, so session ${id} was closed`
    : `session ${id}: exit status ${c.status}`;
}

function ended(s: Readable): Promise<void> {
  if (s.readableEnded || s.destroyed) return Promise.resolve();
  return new Promise((r) => {
    s.once('end', r);
    s.once('close', r);
  });
}

const SIGNALS: Record<string, number> = {
  SIGHUP: 1,
  SIGINT: 2,
  SIGQUIT: 3,
  SIGKILL: 9,
  SIGTERM: 15,
};
function signalNumber(sig: NodeJS.Signals | null): number {
  return sig ? (SIGNALS[sig] ?? 0) : 0;
}
