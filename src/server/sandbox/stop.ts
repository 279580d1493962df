/**
 * Ending every process of an instance, at every level: with a cgroup, everything in it, pid 1
 * last and reaped by its own parent; without one (a normal user's server without delegation,
 * `none` mode), pid 1 (whose pid namespace the kernel then empties) and every process the sandbox
 * started with all below it. Every signal goes by pid and start time: while a namespace dies, a
 * number seen may go to another process (of another instance, say). What the kernel has not let
 * die after every kill and wait is reported, not forgotten: its instance's host ids stay taken.
 */
import { raceDeadline, until } from '../../internal/deadline.js';
import type { Logger } from '../../internal/log.js';
import {
  descendants,
  parentOf,
  processRef,
  reaped,
  signalProcess,
  signalQuietly,
  stillRunning,
  type Supervised,
} from '../../internal/process.js';
import { readlinkSync } from 'node:fs';
import type { Cgroup } from './cgroups.js';

/** How long a stop waits for the processes inside to end before it ends pid 1 anyway. */
export const KILL_INSIDE_MS = 3000;
/**
 * How long a stop waits for what it SIGKILLed to be reaped by its own parent before it kills that
 * parent too (which hands the rest to the host's init). The kill cannot be refused; the wait is for
 * the kernel to finish the exits, which some processes make slow on purpose (an exit that must
 * free hundreds of GiB of mappings took 3–5 s here). The stop's answer does not wait for it.
 */
const REAP_MS = 30_000;
/** How long a stop without a cgroup waits for every process it signalled to be gone. */
const GONE_MS = 3000;

/** The processes of one instance, as a stop sees them. */
export interface InstanceProcesses {
  /** The instance's name (for the log). */
  name: string;
  log: Logger;
  cgroup: Cgroup | undefined;
  /** Host pid of pid 1 of its pid namespace, 0 without one. */
  init: number;
  /** The processes the sandbox started itself (wrappers, its anchor). */
  procs: ReadonlySet<Supervised>;
  /** Every live process of the instance (host pids). */
  pids(): number[];
}

/**
 * Kill one process of the sandbox with everything below it: the processes inside first
 * (their bubblewrap then exits on its own), then the process itself.
 */
export async function terminate(proc: Supervised, reapMs = KILL_INSIDE_MS): Promise<void> {
  if (!proc.running) return;
  // by start time: while the namespace dies, a number seen may go to another process
  const below = descendants(proc.pid).flatMap((pid) => processRef(pid) ?? []);
  signalQuietly(proc.pid, 'SIGCONT');
  for (const ref of below) signalProcess(ref, 'SIGCONT');
  for (const ref of below) signalProcess(ref, 'SIGKILL');
  if (below.length > 0) {
    // the process reaps what it started and then exits by itself; ended first, it would
    // leave them to the host's init (a busy machine can take over a second for all to end)
    await raceDeadline(proc.exited, reapMs);
  }
  await proc.kill(200);
}

/** Kill every process of the instance; true when some still ran after every kill and wait. */
export async function endProcesses(of: InstanceProcesses): Promise<boolean> {
  const { cgroup, init } = of;
  if (cgroup) {
    // Every process of the instance is in its cgroup, the wrappers outside its pid namespace
    // too. Its disk goes with it: nothing needs a graceful end. Order matters: the processes
    // inside die first, while their parents (bubblewrap outside, pid 1 inside) are there to
    // reap them; only then pid 1, whose death could not complete while the namespace held
    // zombies nobody reaps (orphans would go to the host's init, which need not reap).
    await killInside(of, cgroup);
    // only while it is still ours: a pid 1 that died earlier may have left its number to
    // another process (of another instance, say)
    const pid1 = init && cgroup.pids().includes(init) ? processRef(init) : undefined;
    if (pid1) {
      signalProcess(pid1, 'SIGKILL');
      // Its parent, the anchor that made its pid namespace, reaps it and then ends by itself.
      // Killed with the rest at once, the anchor often died first, and pid 1 became a zombie
      // of the host's init (which need not reap: in a container it may be the server itself).
      // pid 1 dies last in its namespace, after every process in there has exited.
      const done = await until(() => reaped(pid1), { timeoutMs: REAP_MS, intervalMs: 5 });
      if (!done) {
        of.log.warn(
          { instance: of.name },
          `the instance's pid 1 was not reaped ${REAP_MS} ms after SIGKILL; killing its parent`,
        );
      }
    }
    await cgroup.kill();
    await Promise.all([...of.procs].map((p) => p.exited));
    const lingering = cgroup.pids().length > 0;
    if (!lingering) {
      await cgroup
        .remove()
        .catch((err: unknown) => of.log.warn({ err }, 'could not remove the instance cgroup'));
    }
    return lingering;
  }
  // by start time: a number seen before the waits may have gone to another process since
  const all = of.pids().flatMap((pid) => processRef(pid) ?? []);
  // pid 1 dying makes the kernel kill the whole pid namespace
  const pid1 = init ? all.find((ref) => ref.pid === init) : undefined;
  if (pid1) signalProcess(pid1, 'SIGKILL');
  await Promise.all([...of.procs].map((p) => terminate(p, REAP_MS)));
  for (const ref of all) signalProcess(ref, 'SIGKILL');
  return !(await until(() => !all.some(stillRunning), { timeoutMs: GONE_MS, intervalMs: 20 }));
}

/**
 * SIGKILL every process in the instance's pid namespace but pid 1, and wait until those whose
 * parent is not pid 1 are gone. pid 1's own children need no wait: pid 1 reaps them, and the
 * kernel does when pid 1 dies; and pid 1 starts its `sleep` again as soon as it is killed, so
 * waiting for them all never ended before the timeout (3 s of every stop).
 */
async function killInside(of: InstanceProcesses, cgroup: Cgroup): Promise<void> {
  const { init } = of;
  if (!init || !cgroup.pids().includes(init)) return;
  let ns: string;
  try {
    ns = readlinkSync(`/proc/${init}/ns/pid`);
  } catch {
    return; // pid 1 is gone already
  }
  const inside = () =>
    cgroup.pids().filter((pid) => {
      if (pid === init) return false;
      try {
        return readlinkSync(`/proc/${pid}/ns/pid`) === ns;
      } catch {
        return false;
      }
    });
  await cgroup.freeze().catch(() => {}); // nothing forks between listing and signals
  for (const pid of inside()) signalQuietly(pid, 'SIGKILL');
  await cgroup.thaw().catch(() => {});
  const ended = await until(
    () => {
      const left = inside();
      for (const pid of left) signalQuietly(pid, 'SIGKILL');
      return left.every((pid) => parentOf(pid) === init);
    },
    { timeoutMs: KILL_INSIDE_MS, intervalMs: 5 },
  );
  if (!ended) {
    of.log.warn(
      { instance: of.name, left: inside() },
      `processes of the instance still ran ${KILL_INSIDE_MS} ms after SIGKILL; ending pid 1 anyway`,
    );
  }
}
