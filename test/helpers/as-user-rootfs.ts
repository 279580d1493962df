/**
 * Run by test/integration/sandbox/rootfs-writes.test.ts as a normal user (`runuser -u burrow-ci`),
 * from the repository root with `node --import tsx` (and as root in a simulated container): a
 * server of the user's own with a disk quota of `QUOTA` bytes (none without `QUOTA`), an ubuntu
 * instance, and its shell's attempts to write outside its disk and, with a quota, past it
 * (test/helpers/rootfs-attack.ts). Prints one JSON line of findings on stdout.
 */
import { attackRootfs } from './rootfs-attack.js';
import { testServer } from './server.js';

const found: Record<string, unknown> = { uid: process.getuid?.() };
const quota = Number(process.env.QUOTA ?? 0);
const server = await testServer(quota ? { isolation: { diskBytes: quota } } : {});
try {
  const res = await server.api('/v1/start', { json: { instance_type: 'ubuntu' } });
  const { id } = (await res.json()) as { id: string };
  try {
    Object.assign(
      found,
      await attackRootfs(
        async (command, timeout = 30) => {
          const r = await server.api(`/v1/instance/${id}/bash`, { json: { command, timeout } });
          const body = (await r.json()) as { output?: string; error?: string };
          return `${body.output ?? ''}${body.error ?? ''}`;
        },
        Number(process.env.ATTEMPT),
        quota > 0,
      ),
    );
  } finally {
    await server.api(`/v1/instance/${id}/stop`, { method: 'POST' });
  }
} catch (err) {
  found.error = String((err as Error).stack ?? err);
} finally {
  await server.close();
}
process.stdout.write(`${JSON.stringify(found)}\n`);
