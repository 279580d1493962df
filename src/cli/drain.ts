/**
 * `burrow drain`: drain a running server (a cluster node, usually) through its API, as SIGTERM
 * does on its machine: it takes no new instances, its readiness turns false, and it exits once
 * its instances ended or its drain deadline passed (src/server/cluster/drain.ts). The route is burrow's
 * own, `POST /v1/node/drain` (the operation `nodeDrain`), behind the admin key.
 */
import { parseArgs } from 'node:util';
import { DEFAULT_BASE_URL } from '../client/core.js';
import { DEFAULT_DRAIN_SECONDS } from '../server/config.js';
import { apiFlags } from './common.js';
import { clientApiKey } from './secrets.js';

export const usage = `burrow drain [--base-url URL] [--api-key KEY] [--json]

Drains the server at --base-url (a node's own URL, not a load balancer's: the node that answers
is the one drained). It takes no new instances from now on and its GET /readyz answers 503; its
running instances go on until they end or its drain deadline (BURROW_DRAIN_SECONDS, default ${DEFAULT_DRAIN_SECONDS}),
then they stop with end_reason node_drained and the server exits 0.

  --base-url URL   server (default: BURROW_BASE_URL, else ${DEFAULT_BASE_URL})
  --api-key KEY    API key (default: BURROW_API_KEY); prefer --api-key-file PATH or the
                   variable (every local user can read a command line)
  --json           print the server's answer as JSON`;

export async function run(argv: string[]): Promise<void> {
  const { values } = parseArgs({ args: argv, options: apiFlags });
  if (values.help) return console.log(usage);
  const base = values['base-url'] ?? process.env.BURROW_BASE_URL ?? DEFAULT_BASE_URL;
  const key = clientApiKey(values);
  if (!key) throw new Error('no API key: pass --api-key-file or set BURROW_API_KEY');
  let res: Response;
  try {
    res = await fetch(`${base.replace(/\/+$/, '')}/v1/node/drain`, {
      method: 'POST',
      headers: { 'x-api-key': key },
      signal: AbortSignal.timeout(30_000),
    });
  } catch (err) {
    throw new Error(`cannot reach ${base} (${(err as Error).message})`, { cause: err });
  }
  const body = (await res.json().catch(() => ({}))) as { detail?: string; deadline?: string };
  if (!res.ok) throw new Error(`${base} answered ${res.status}: ${body.detail ?? res.statusText}`);
  if (values.json) return console.log(JSON.stringify(body, null, 2));
  console.log(
    `${base} is draining: no new instances; the running ones stop at ${body.deadline ?? 'its deadline'} at the latest, then it exits`,
  );
}
