/**
 * The typed client on an `ubuntu` instance: run a command, upload a file (streamed from disk),
 * and read it back from Python on the instance's Jupyter kernel.
 *
 *   node --import tsx examples/client-ubuntu.ts
 *
 * Uses BURROW_BASE_URL / BURROW_API_KEY when set, else an embedded server in this process.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Burrow, embeddedServer } from 'burrow-sandbox';

const local = join(mkdtempSync(join(tmpdir(), 'burrow-example-')), 'data.csv');
writeFileSync(local, 'name,price\nkettle,25\nteapot,18.5\n');

await using lease = process.env.BURROW_BASE_URL ? undefined : await embeddedServer();
await using burrow = new Burrow(lease ? { baseUrl: lease.url, apiKey: lease.apiKey } : {});

const box = await burrow.instances.start({ instance_type: 'ubuntu', timeout_hours: 0.5 });
try {
  const { output } = await burrow.instance.bash(box.id, { command: 'uname -s' });
  console.log(`bash: ${output?.trim()}`);
  await burrow.instance.upload(box.id, { file: local, path: 'inputs/data.csv' }); // streamed
  const run = await burrow.code.execute(box.id, {
    code: 'import csv\nrows = list(csv.DictReader(open("inputs/data.csv")))\nprint(sum(float(r["price"]) for r in rows))',
  });
  console.log(`python: ${run.status} ${run.stdout.trim()}`);
} finally {
  await burrow.instances.stop(box.id);
}
