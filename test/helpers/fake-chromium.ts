/**
 * A fake Chromium on the far end of an in-memory CdpPipe, for the multiplexer's unit tests
 * (src/server/chromium/mux.ts): records the commands written to it and writes what a test tells it.
 */
import { PassThrough } from 'node:stream';
import { CdpPipe } from '../../src/server/chromium/pipe.js';

/** One command as the mux wrote it. */
export interface Wire {
  id: number;
  method: string;
  params: Record<string, unknown>;
  sessionId?: string;
}

export function fakeChromium() {
  const toChromium = new PassThrough();
  const fromChromium = new PassThrough();
  const commands: Wire[] = [];
  const waiters: (() => void)[] = [];
  let partial = '';
  toChromium.on('data', (chunk: Buffer) => {
    partial += chunk.toString();
    const parts = partial.split('\0');
    partial = parts.pop()!;
    for (const p of parts) commands.push(JSON.parse(p) as Wire);
    for (const w of waiters.splice(0)) w();
  });
  const pipe = new CdpPipe(toChromium, fromChromium);
  return {
    pipe,
    commands,
    /** The first command written from index `after` on whose method is `method`. */
    async next(method: string, after = 0): Promise<Wire> {
      for (;;) {
        const found = commands.slice(after).find((c) => c.method === method);
        if (found) return found;
        await new Promise<void>((r) => waiters.push(r));
      }
    },
    /** Write one message as Chromium would (a string is written as is). */
    write(message: string | Record<string, unknown>) {
      const text = typeof message === 'string' ? message : JSON.stringify(message);
      fromChromium.write(`${text}\0`);
    },
  };
}
