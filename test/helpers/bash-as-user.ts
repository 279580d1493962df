/**
 * Run by a test as a normal user (test/helpers/normal-user.ts), from the repository root with
 * `node --import tsx`: the embedded default's server at the unprivileged level, one ubuntu
 * instance, and the shell command `$COMMAND` (base64) run in its bash. Prints one JSON line:
 * `{ uid, output }`, or `{ uid, error }` if a step failed. Nothing here asserts.
 */
import { Burrow, embeddedServer } from 'burrow-sandbox';

const found: Record<string, unknown> = { uid: process.getuid?.() };
const lease = await embeddedServer();
const client = new Burrow({ baseUrl: lease.url, apiKey: lease.apiKey });
try {
  const { id } = await client.instances.start({ instance_type: 'ubuntu' });
  const command = Buffer.from(process.env.COMMAND ?? '', 'base64').toString();
  const r = await client.instance.bash(id, { command, timeout: 120 });
  found.output = `${r.output ?? ''}${r.error ?? ''}`;
  await client.instances.stop(id);
} catch (err) {
  found.error = String((err as Error).stack ?? err);
} finally {
  await lease.release();
}
console.log(JSON.stringify(found));
