/**
 * The kernel-reply thread's entry (reply-thread.ts starts it): decodes each bridge line it is
 * sent (reply-decode.ts) and sends back the reply, its outputs' bytes moved, not copied.
 */
import { parentPort } from 'node:worker_threads';
import { decodeReply, type DecodedReply } from './reply-decode.js';

const port = parentPort;
if (port) {
  port.on('message', ({ seq, line }: { seq: number; line: string }) => {
    let reply: DecodedReply | undefined;
    let bad: string | undefined;
    try {
      reply = decodeReply(line);
    } catch (err) {
      bad = (err as Error).message;
    }
    const moved = reply?.outputs ? [reply.outputs.buffer as ArrayBuffer] : [];
    port.postMessage({ seq, reply, bad }, moved);
  });
}
