/**
 * What a process of a sandbox left behind when it failed, said in a message: how it exited, and
 * the tail of what it wrote to stderr. Processes of an instance may be hostile, so what they wrote
 * is kept bounded.
 */
import type { ExitInfo } from '../../internal/process.js';

export function describeExit(e: ExitInfo): string {
  return e.signal ? `signal ${e.signal}` : `status ${e.code}`;
}

/** Error output kept for a message: its last 2 KiB (the process writing it may be hostile). */
export function keepTail(kept: string, chunk: Buffer): string {
  return (kept + chunk.toString()).slice(-2048);
}
