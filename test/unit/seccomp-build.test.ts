/**
 * The seccomp program as `buildSeccompFilter` makes it, built inside each test (a filter that
 * fails to build must fail a test, not only the loading of a file): which architectures have
 * one, that the deny list is exactly what it refuses over the whole syscall range, and that
 * the assembler refuses a program whose jumps do not fit the 8-bit offsets of classic BPF
 * instead of emitting a jump that lands on the wrong instruction.
 */
import { afterEach, describe, expect, it } from 'vitest';
import {
  buildSeccompFilter,
  CHECKED_SYSCALLS,
  DENIED_SYSCALLS,
  EPERM,
  RET_ALLOW,
  RET_ERRNO,
  RET_KILL_PROCESS,
  SECCOMP_ARCHES,
  seccompSupported,
  type SeccompArch,
} from '../../src/server/sandbox/seccomp.js';
import { runSeccomp } from '../helpers/cbpf.js';

const ERR = (e: number) => (RET_ERRNO | e) >>> 0;
const ARCHES = ['x64', 'arm64'] as const;

describe('which architectures have a filter', () => {
  it('x64 and arm64 have one; others, and unknown names, do not', () => {
    expect(seccompSupported('x64')).toBe(true);
    expect(seccompSupported('arm64')).toBe(true);
    for (const arch of ['ia32', 'arm', 'riscv64', 's390x', 'ppc64', '']) {
      expect(seccompSupported(arch), arch).toBe(arch in SECCOMP_ARCHES);
    }
    expect(seccompSupported('ia32')).toBe(false);
    expect(seccompSupported(process.arch)).toBe(process.arch === 'x64' || process.arch === 'arm64');
  });

  it('building for an architecture without a table throws, naming it', () => {
    expect(() => buildSeccompFilter('ia32')).toThrow(/no seccomp filter for architecture ia32/);
    expect(() => buildSeccompFilter('riscv64')).toThrow(/riscv64/);
  });

  it('builds for this machine by default (the same bytes as naming its architecture)', () => {
    if (!seccompSupported()) {
      expect(() => buildSeccompFilter()).toThrow();
      return;
    }
    expect(buildSeccompFilter().equals(buildSeccompFilter(process.arch))).toBe(true);
  });
});

describe.each(ARCHES)('the %s filter over every syscall number', (arch) => {
  it('refuses exactly the numbers of the deny list, allows every other one', () => {
    const prog = buildSeccompFilter(arch);
    expect(prog.length % 8).toBe(0);
    const spec = SECCOMP_ARCHES[arch]!;
    const numbers = spec.numbers as Record<string, number | undefined>;
    const denied = new Set(DENIED_SYSCALLS.map((n) => numbers[n]).filter((n) => n !== undefined));
    const checked = new Set(CHECKED_SYSCALLS.map((n) => numbers[n]));
    expect(denied.size).toBeGreaterThan(40);
    let allowed = 0;
    for (let nr = 0; nr < 1024; nr++) {
      if (checked.has(nr)) continue; // decided by their arguments (seccomp-filter.test.ts)
      const got = runSeccomp(prog, { nr, arch: spec.audit, args: [0n, 0n, 0n] });
      expect(got, `${arch} syscall ${nr}`).toBe(denied.has(nr) ? ERR(EPERM) : RET_ALLOW);
      if (got === RET_ALLOW) allowed++;
    }
    expect(allowed).toBe(1024 - denied.size - checked.size);
  });

  it('kills another ABI: a foreign audit value, and on x86_64 the x32 numbers', () => {
    const prog = buildSeccompFilter(arch);
    const spec = SECCOMP_ARCHES[arch]!;
    const other = arch === 'x64' ? SECCOMP_ARCHES.arm64!.audit : SECCOMP_ARCHES.x64!.audit;
    expect(runSeccomp(prog, { nr: 0, arch: other })).toBe(RET_KILL_PROCESS);
    expect(runSeccomp(prog, { nr: 0, arch: spec.audit })).toBe(
      denied(arch, 0) ? ERR(EPERM) : RET_ALLOW,
    );
    if (spec.foreignFrom !== undefined) {
      expect(runSeccomp(prog, { nr: spec.foreignFrom, arch: spec.audit })).toBe(RET_KILL_PROCESS);
      expect(runSeccomp(prog, { nr: spec.foreignFrom - 1, arch: spec.audit })).toBe(RET_ALLOW);
    } else {
      // no second ABI numbered above the native one: a large number is just unknown (ENOSYS)
      expect(runSeccomp(prog, { nr: 0x40000000, arch: spec.audit })).toBe(RET_ALLOW);
    }
  });
});

function denied(arch: string, nr: number): boolean {
  const numbers = SECCOMP_ARCHES[arch]!.numbers as Record<string, number | undefined>;
  return DENIED_SYSCALLS.some((n) => numbers[n] === nr);
}

describe('jumps that do not fit', () => {
  // A deny list long enough that a jump over it (the architecture check's jump to the final
  // kill, the denied syscalls' jumps to the shared EPERM return) passes the 255 instructions a
  // classic BPF conditional jump can skip: the build must refuse it. The
  // tables are extended for the test only (a fake architecture and extra names) and restored.
  const arches = SECCOMP_ARCHES as Record<string, SeccompArch>;
  const names = DENIED_SYSCALLS as unknown as string[];
  const before = names.length;
  afterEach(() => {
    names.length = before;
    delete arches.test;
  });

  function withExtraDenials(extra: number): () => Buffer {
    names.length = before;
    const numbers: Record<string, number> = { ...SECCOMP_ARCHES.x64!.numbers };
    for (let i = 0; i < extra; i++) {
      names.push(`fake_${i}`);
      numbers[`fake_${i}`] = 1000 + i;
    }
    arches.test = { audit: 0xc000003e, numbers: numbers as SeccompArch['numbers'] };
    return () => buildSeccompFilter('test');
  }

  it('the longest deny list that fits builds a program that still answers right; one more throws', () => {
    let fits = -1;
    for (let extra = 150; extra < 320; extra++) {
      try {
        withExtraDenials(extra)();
        fits = extra;
      } catch (err) {
        expect(String(err)).toMatch(/seccomp: jump to \w+ out of range/);
        break;
      }
    }
    expect(fits).toBeGreaterThan(150);
    expect(fits).toBeLessThan(319);
    const prog = withExtraDenials(fits)();
    const audit = 0xc000003e;
    // the architecture check's jump to the kill at the end is the longest: exactly 255 here
    // (the second instruction; `struct sock_filter` is {u16 code, u8 jt, u8 jf, u32 k})
    expect(prog.readUInt8(8 + 3)).toBe(255);
    expect(runSeccomp(prog, { nr: 0, arch: 0x40000003 })).toBe(RET_KILL_PROCESS);
    expect(
      runSeccomp(prog, { nr: SECCOMP_ARCHES.x64!.numbers[DENIED_SYSCALLS[0]]!, arch: audit }),
    ).toBe(ERR(EPERM));
    expect(runSeccomp(prog, { nr: 1000, arch: audit })).toBe(ERR(EPERM));
    expect(runSeccomp(prog, { nr: 1000 + fits - 1, arch: audit })).toBe(ERR(EPERM));
    expect(runSeccomp(prog, { nr: 1000 + fits, arch: audit })).toBe(RET_ALLOW);
    expect(() => withExtraDenials(fits + 1)()).toThrow(/out of range/);
  });
});
