/**
 * The decision the foreign-ABI checks (guard-syscalls, seccomp-denials) take from the host's
 * kernel: both branches, fed the facts of a kernel with 32-bit emulation and of kernels without
 * it, so the branch this machine does not take is exercised here too.
 */
import { describe, expect, it } from 'vitest';
import { hostAbi32, readAbi32Facts } from '../helpers/abi32.js';

const WITH = 'CONFIG_X86_64=y\nCONFIG_IA32_EMULATION=y\n# CONFIG_X86_X32_ABI is not set\n';
const WITHOUT = 'CONFIG_X86_64=y\n# CONFIG_IA32_EMULATION is not set\n';
const DEFAULT_OFF = `${WITH}CONFIG_IA32_EMULATION_DEFAULT_DISABLED=y\n`;
const BOOT = 'console=ttyS0 quiet';

describe('whether the host runs int 0x80, and what the checks assert then', () => {
  it('a kernel with 32-bit emulation: getpid answers on the host, the filter kills inside', () => {
    expect(hostAbi32({ config: WITH, cmdline: BOOT, vsyscall32: true })).toMatchObject({
      present: true,
      host: 'ok',
      inside: 'SIGSYS',
    });
  });

  it('a kernel built without it: a fault on the host and inside alike', () => {
    const abi = hostAbi32({ config: WITHOUT, cmdline: BOOT, vsyscall32: false });
    expect(abi).toMatchObject({ present: false, host: 'SIGSEGV', inside: 'SIGSEGV' });
    expect(abi.why).toMatch(/built without/);
  });

  it('the boot parameter decides over the build default, either way', () => {
    expect(
      hostAbi32({ config: WITH, cmdline: `${BOOT} ia32_emulation=0`, vsyscall32: true }),
    ).toMatchObject({ present: false, host: 'SIGSEGV', inside: 'SIGSEGV' });
    expect(
      hostAbi32({ config: WITH, cmdline: `${BOOT} ia32_emulation=off`, vsyscall32: true }),
    ).toMatchObject({ present: false });
    expect(hostAbi32({ config: DEFAULT_OFF, cmdline: BOOT, vsyscall32: true })).toMatchObject({
      present: false,
      inside: 'SIGSEGV',
    });
    expect(
      hostAbi32({ config: DEFAULT_OFF, cmdline: `${BOOT} ia32_emulation=1`, vsyscall32: true }),
    ).toMatchObject({ present: true, inside: 'SIGSYS' });
    // the last one counts, as the kernel reads them; a value it cannot read is ignored
    expect(
      hostAbi32({
        config: WITH,
        cmdline: 'ia32_emulation=1 ia32_emulation=off ia32_emulation=maybe',
        vsyscall32: true,
      }),
    ).toMatchObject({ present: false });
    // built without it, no parameter turns it on
    expect(
      hostAbi32({ config: WITHOUT, cmdline: 'ia32_emulation=1', vsyscall32: false }),
    ).toMatchObject({ present: false });
  });

  it('without a readable configuration, the abi sysctl says whether it is built in', () => {
    expect(hostAbi32({ cmdline: BOOT, vsyscall32: false })).toMatchObject({
      present: false,
      host: 'SIGSEGV',
    });
    expect(hostAbi32({ cmdline: BOOT, vsyscall32: true })).toMatchObject({
      present: true,
      host: 'ok',
    });
    expect(hostAbi32({ cmdline: 'ia32_emulation=off', vsyscall32: true })).toMatchObject({
      present: false,
    });
  });

  it("the host's probe decides over the kernel's word where int 0x80 faults", () => {
    // built with it and not booted without it, in a guest whose hypervisor does not carry it
    const abi = hostAbi32({ config: WITH, cmdline: BOOT, vsyscall32: true, probe: 'SIGSEGV' });
    expect(abi).toMatchObject({ present: false, host: 'SIGSEGV', inside: 'SIGSEGV' });
    expect(abi.why).toMatch(/built with 32-bit emulation.*but int 0x80 faults on this host/);
    // agreeing with the kernel, the probe changes nothing
    expect(hostAbi32({ config: WITH, cmdline: BOOT, vsyscall32: true, probe: 'ok' })).toEqual(
      hostAbi32({ config: WITH, cmdline: BOOT, vsyscall32: true }),
    );
    // an answer where the kernel has no such ABI, or another signal, contradicts the reading
    expect(() =>
      hostAbi32({ config: WITHOUT, cmdline: BOOT, vsyscall32: false, probe: 'ok' }),
    ).toThrow(/int 0x80 on the host: ok/);
    expect(() =>
      hostAbi32({ config: WITH, cmdline: BOOT, vsyscall32: true, probe: 'SIGILL' }),
    ).toThrow(/SIGILL/);
  });

  it("reads this host's facts", () => {
    const facts = readAbi32Facts();
    expect(typeof facts.cmdline).toBe('string');
    expect(typeof facts.vsyscall32).toBe('boolean');
    expect(hostAbi32(facts).why).toMatch(/kernel/);
  });
});
