/** Ports for the tests' own servers. */
import { createServer } from 'node:net';

/** A TCP port free on 127.0.0.1 when asked (the caller binds it right after). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}
