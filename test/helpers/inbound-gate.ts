/**
 * A gate (src/server/chromium/inbound.ts) on a fake pipe, for its unit tests: the gate's logic is
 * bytes counted against bounds of tens and hundreds of MiB, so a message here is only a name and
 * the bytes it stands for (`msg('a', 8 * MiB)`), never that much memory. The pipe says whether its
 * socket is full (`unwritten`) and drains when the test says; barriers wait until the test answers
 * them; every client's socket records when it is paused and resumed, in one log.
 *
 * The gates' totals are module-wide (one server): `closeGates()` after each test closes every gate
 * a test made, so what one test left waiting does not count against the next.
 */
import type { CdpPipe } from '../../src/server/chromium/pipe.js';
import { InboundGate, type Readers } from '../../src/server/chromium/inbound.js';

export const MiB = 1024 * 1024;

/** A message named `name` that takes `bytes` on the wire. */
export const msg = (name: string, bytes: number) => `${name}:${bytes}`;

export class FakePipe {
  isOpen = true;
  /** Bytes the socket holds not yet handed to Chromium (the gate writes only at 0). */
  unwritten = 0;
  /** After each message written the socket is full again: one message per drain. */
  fillOnSend = false;
  /** Names of the messages written, in order. */
  readonly written: string[] = [];
  readonly drains: (() => void)[] = [];
  failure: string | undefined;

  measure(message: string | readonly Buffer[]): number {
    return Number(String(message).split(':')[1]);
  }
  send(message: string | readonly Buffer[]): void {
    this.written.push(String(message).split(':')[0]!);
    if (this.fillOnSend) this.unwritten = 1;
  }
  drained(then: () => void): void {
    this.drains.push(then);
  }
  fail(reason: string): void {
    if (!this.isOpen) return;
    this.failure = reason;
    this.isOpen = false;
  }
  /** The socket handed everything to Chromium: whoever waited for that is told. */
  drain(): void {
    this.unwritten = 0;
    for (const then of this.drains.splice(0)) then();
  }
}

const made = new Set<InboundGate>();

export interface Rig {
  gate: InboundGate;
  pipe: FakePipe;
  /** Barriers written and not answered yet, oldest first. */
  barriers: (() => void)[];
  /** How many barriers were written in all. */
  barrierCount: () => number;
  overflows: Readers[];
  /** The clients the gate pauses and resumes together (its multiplexer's). */
  clients: Readers[];
  /** Answers the oldest barrier. */
  answer(): void;
}

export function rig(): Rig {
  const pipe = new FakePipe();
  const barriers: (() => void)[] = [];
  let count = 0;
  const overflows: Readers[] = [];
  const clients: Readers[] = [];
  const gate = new InboundGate(pipe as unknown as CdpPipe, {
    barrier: (answered) => {
      count++;
      barriers.push(answered);
    },
    overflow: (owner) => overflows.push(owner),
    readers: () => clients,
  });
  made.add(gate);
  return {
    gate,
    pipe,
    barriers,
    barrierCount: () => count,
    overflows,
    clients,
    answer: () => barriers.shift()!(),
  };
}

/** A client whose socket's pauses and resumes go to `log` as `name pause` / `name resume`. */
export function reader(name: string, log: string[]): Readers {
  return {
    peer: {
      pause: () => log.push(`${name} pause`),
      resume: () => log.push(`${name} resume`),
    },
  };
}

export function closeGates(): void {
  for (const gate of made) gate.close();
  made.clear();
}
