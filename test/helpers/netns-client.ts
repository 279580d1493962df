/**
 * The client of the multi-machine harness (netns-cluster.ts): a process in the client network
 * namespace that runs the test's client code there, so its HTTP requests, `cdp_url` and
 * live-view sockets leave from the client's own address, as a real client's would.
 *
 * It takes `{ seq, code, arg }` over the IPC channel: `code` is the source of an async function
 * `(lib, arg) => result`, which gets its libraries in `lib` (it can import nothing: its source
 * is all that travels) and returns something JSON can carry. The answer is `{ seq, value }` or
 * `{ seq, error }`.
 */
import { chromium } from 'playwright-core';
import WebSocket from 'ws';
import { Burrow } from '../../src/client/index.js';

/** What client code gets as its first argument. */
export const clientLib = { Burrow, chromium, WebSocket };
export type ClientLib = typeof clientLib;

interface Job {
  seq: number;
  code: string;
  arg: unknown;
}

process.on('message', (job: Job) => {
  void (async () => {
    try {
      // the test's own code, sent here from another namespace
      const fn = new Function(`return (${job.code});`)() as (
        lib: ClientLib,
        arg: unknown,
      ) => Promise<unknown>;
      const value = await fn(clientLib, job.arg);
      process.send!({ seq: job.seq, value: value === undefined ? null : value });
    } catch (err) {
      const e = err as Error;
      process.send!({ seq: job.seq, error: `${e.message}\n${e.stack ?? ''}` });
    }
  })();
});
// the harness's end is this process's end
process.on('disconnect', () => process.exit(0));
