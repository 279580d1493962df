/**
 * Whether this host's kernel runs 32-bit x86 system calls (`int 0x80`), read from the kernel's
 * build configuration and command line, and what a check of the seccomp filter's foreign-ABI kill
 * then asserts.
 *
 * With the 32-bit ABI, `int 0x80` is a system call: on the host it answers, inside an instance
 * the filter kills the process at it (SIGSYS). Without it (a kernel built without
 * CONFIG_IA32_EMULATION, or booted with `ia32_emulation=0`), `int 0x80` is a fault, not a system
 * call: the process dies of SIGSEGV on the host and inside alike, before any system call code
 * (the filter's included) runs, so nothing of the host is reached either way. A check asserts
 * whichever holds on the host it runs on, decided here so both branches can be tested on one
 * machine (test/unit/abi32-host.test.ts).
 *
 * The kernel's word is not the last one: a guest kernel built with the emulation may run where
 * the hypervisor does not carry 32-bit system calls (a PVM guest, as on one machine here: built
 * with it, not booted without it, and `int 0x80` a fault). So the host's own probe is a fact too:
 * a fault where the kernel says the ABI is there means it is not (said so in `why`), and an
 * answer where the kernel says it is not contradicts the reading, and fails the check.
 */
import { existsSync, readFileSync } from 'node:fs';
import { release } from 'node:os';
import { gunzipSync } from 'node:zlib';

/** What the host says about its kernel. */
export interface Abi32Facts {
  /** The kernel's build configuration (/proc/config.gz or /boot/config-<release>), if readable. */
  config?: string;
  /** The kernel's command line (/proc/cmdline). */
  cmdline: string;
  /** Whether /proc/sys/abi/vsyscall32 exists: only a kernel with 32-bit emulation has it. */
  vsyscall32: boolean;
  /** What `int 0x80` (getpid) did in a probe on the host: `ok`, or the signal that killed it. */
  probe?: string;
}

/** The decision: whether the ABI is there, why, and what `int 0x80` ends in on each side. */
export interface Abi32 {
  present: boolean;
  why: string;
  /** The host probe's answer: `ok` (getpid answered) or the signal that killed it. */
  host: 'ok' | 'SIGSEGV';
  /** The signal that kills the process making the call inside an instance. */
  inside: 'SIGSYS' | 'SIGSEGV';
}

/** kstrtobool: what the kernel reads a boolean parameter's value as, or undefined if it cannot. */
function kernelBool(value: string): boolean | undefined {
  if (/^([1yt]|on)/i.test(value)) return true;
  if (/^([0nf]|of)/i.test(value)) return false;
  return undefined;
}

/** A boolean kernel parameter: its last value the kernel could read, or undefined. */
function bootFlag(cmdline: string, name: string): boolean | undefined {
  return [...cmdline.matchAll(new RegExp(`(?:^|\\s)${name}=(\\S*)`, 'g'))]
    .map((m) => kernelBool(m[1]!))
    .filter((v) => v !== undefined)
    .pop();
}

export function hostAbi32(facts: Abi32Facts): Abi32 {
  const said = kernelSays(facts);
  if (facts.probe === undefined || facts.probe === said.host) return said;
  if (said.present && facts.probe === 'SIGSEGV') {
    return {
      present: false,
      why: `${said.why}, but int 0x80 faults on this host (its hypervisor does not carry it)`,
      host: 'SIGSEGV',
      inside: 'SIGSEGV',
    };
  }
  throw new Error(`int 0x80 on the host: ${facts.probe}, where ${said.why}`);
}

/** What the kernel's configuration and command line say. */
function kernelSays(facts: Abi32Facts): Abi32 {
  const decided = (present: boolean, why: string): Abi32 =>
    present
      ? { present, why, host: 'ok', inside: 'SIGSYS' }
      : { present, why, host: 'SIGSEGV', inside: 'SIGSEGV' };
  const option = (name: string) =>
    facts.config === undefined
      ? undefined
      : new RegExp(`^CONFIG_${name}=y$`, 'm').test(facts.config);
  const built = option('IA32_EMULATION') ?? facts.vsyscall32;
  const source = facts.config === undefined ? '/proc/sys/abi/vsyscall32' : 'its configuration';
  if (!built) return decided(false, `the kernel is built without 32-bit emulation (${source})`);
  const flag = bootFlag(facts.cmdline, 'ia32_emulation');
  if (flag !== undefined) {
    return decided(flag, `the kernel was booted with ia32_emulation=${flag ? 'on' : 'off'}`);
  }
  return option('IA32_EMULATION_DEFAULT_DISABLED')
    ? decided(false, 'the kernel is built with 32-bit emulation off unless booted with it on')
    : decided(true, `the kernel is built with 32-bit emulation (${source})`);
}

/** The facts of the host this runs on. */
export function readAbi32Facts(): Abi32Facts {
  const read = (file: string, gz = false) => {
    try {
      const bytes = readFileSync(file);
      return (gz ? gunzipSync(bytes) : bytes).toString('utf8');
    } catch {
      return undefined;
    }
  };
  const config = read('/proc/config.gz', true) ?? read(`/boot/config-${release()}`);
  return {
    ...(config !== undefined && { config }),
    cmdline: read('/proc/cmdline') ?? '',
    vsyscall32: existsSync('/proc/sys/abi/vsyscall32'),
  };
}
