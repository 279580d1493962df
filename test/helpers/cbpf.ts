/**
 * A classic BPF interpreter for seccomp programs, to check what a filter answers without loading
 * it: runs `struct sock_filter[]` bytes (little-endian) over a `struct seccomp_data`. It follows
 * the kernel's rules (forward jumps only, 32-bit aligned loads inside the data, every path ends
 * in a return) and throws where the kernel would refuse the program.
 */

export interface SeccompData {
  nr: number;
  arch: number;
  /** Up to six arguments, as the 64-bit values of the registers. */
  args?: readonly bigint[];
}

const MAX_INSNS = 4096;
const MEM_WORDS = 16;

/** `struct seccomp_data` as the kernel lays it out (little-endian). */
export function seccompData({ nr, arch, args = [] }: SeccompData): Buffer {
  const b = Buffer.alloc(64);
  b.writeInt32LE(nr, 0);
  b.writeUInt32LE(arch >>> 0, 4);
  b.writeBigUInt64LE(0x401000n, 8); // instruction_pointer
  args.forEach((a, i) => b.writeBigUInt64LE(BigInt.asUintN(64, a), 16 + 8 * i));
  return b;
}

/** The 32-bit value the program returns for `data`. */
export function runSeccomp(program: Buffer, data: SeccompData): number {
  if (program.length % 8 !== 0 || program.length === 0) throw new Error('bad program length');
  const len = program.length / 8;
  if (len > MAX_INSNS) throw new Error('program too long');
  const d = seccompData(data);
  const mem = new Uint32Array(MEM_WORDS);
  let a = 0;
  let x = 0;
  for (let pc = 0; pc < len; pc++) {
    const code = program.readUInt16LE(pc * 8);
    const jt = program.readUInt8(pc * 8 + 2);
    const jf = program.readUInt8(pc * 8 + 3);
    const k = program.readUInt32LE(pc * 8 + 4);
    const cls = code & 0x07;
    const src = code & 0x08 ? x : k; // BPF_X or BPF_K
    switch (cls) {
      case 0x00: // BPF_LD
      case 0x01: {
        // BPF_LDX
        const mode = code & 0xe0;
        let v: number;
        if (mode === 0x20 && cls === 0x00 && (code & 0x18) === 0x00) {
          // BPF_ABS, BPF_W: seccomp only allows aligned word loads inside seccomp_data
          if (k % 4 !== 0 || k + 4 > d.length) throw new Error(`bad load offset ${k} at ${pc}`);
          v = d.readUInt32LE(k);
        } else if (mode === 0x00)
          v = k; // BPF_IMM
        else if (mode === 0x60) {
          if (k >= MEM_WORDS) throw new Error(`bad scratch slot at ${pc}`);
          v = mem[k]!; // BPF_MEM
        } else if (mode === 0x80)
          v = 64; // BPF_LEN
        else throw new Error(`unsupported load 0x${code.toString(16)} at ${pc}`);
        if (cls === 0x00) a = v;
        else x = v;
        break;
      }
      case 0x02: // BPF_ST
      case 0x03: // BPF_STX
        if (k >= MEM_WORDS) throw new Error(`bad scratch slot at ${pc}`);
        mem[k] = cls === 0x02 ? a : x;
        break;
      case 0x04: {
        // BPF_ALU
        const op = code & 0xf0;
        const v = src >>> 0;
        if ((op === 0x30 || op === 0x90) && v === 0) throw new Error(`division by zero at ${pc}`);
        const ops: Record<number, () => number> = {
          0x00: () => a + v,
          0x10: () => a - v,
          0x20: () => Math.imul(a, v),
          0x30: () => Math.floor((a >>> 0) / v),
          0x40: () => a | v,
          0x50: () => a & v,
          0x60: () => (v >= 32 ? 0 : a << v),
          0x70: () => (v >= 32 ? 0 : a >>> v),
          0x80: () => -a,
          0x90: () => (a >>> 0) % v,
          0xa0: () => a ^ v,
        };
        const f = ops[op];
        if (!f) throw new Error(`unsupported ALU 0x${code.toString(16)} at ${pc}`);
        a = f() >>> 0;
        break;
      }
      case 0x05: {
        // BPF_JMP: offsets are forward, relative to the next instruction
        const op = code & 0xf0;
        let next: number;
        if (op === 0x00)
          next = pc + 1 + k; // BPF_JA
        else {
          const v = src >>> 0;
          const ua = a >>> 0;
          const taken =
            op === 0x10
              ? ua === v
              : op === 0x20
                ? ua > v
                : op === 0x30
                  ? ua >= v
                  : op === 0x40
                    ? (ua & v) !== 0
                    : undefined;
          if (taken === undefined) throw new Error(`unsupported jump 0x${code.toString(16)}`);
          next = pc + 1 + (taken ? jt : jf);
        }
        if (next >= len) throw new Error(`jump past the end at ${pc}`);
        pc = next - 1;
        break;
      }
      case 0x06: // BPF_RET
        return ((code & 0x18) === 0x10 ? a : k) >>> 0; // BPF_A or BPF_K
      case 0x07: // BPF_MISC
        if ((code & 0xf8) === 0x00)
          x = a; // TAX
        else if ((code & 0xf8) === 0x80)
          a = x; // TXA
        else throw new Error(`unsupported misc 0x${code.toString(16)} at ${pc}`);
        break;
    }
  }
  throw new Error('program runs off its end without returning');
}
