/** `burrow reap`: stop instances whose session's process is gone (the ledger's orphans). */
import { reapOrphans } from '../session/index.js';
import { parseArgs } from 'node:util';
import { apiFlags, apiFlagsUsage, printJson, table, withClient } from './common.js';

export const usage = `burrow reap [options]

Reads the session ledger (<data dir>/sessions; data dir from BURROW_DATA_DIR, else
$XDG_DATA_HOME/burrow or ~/.local/share/burrow) and, for every instance whose
process is gone: stops it on the given server, or forgets it if it ran on that
process's embedded server (which died with it). Orphans on other servers are
listed as skipped: pass their --base-url and --api-key-file to stop them.

${apiFlagsUsage}`;

export async function run(argv: string[]): Promise<void> {
  const { values } = parseArgs({ args: argv, options: apiFlags, allowPositionals: true });
  if (values.help) return console.log(usage);
  const haveKey =
    values['api-key'] !== undefined ||
    values['api-key-file'] !== undefined ||
    !!(process.env.BURROW_API_KEY || process.env.BURROW_API_KEY_FILE);
  const report = haveKey
    ? await withClient(values, (client) => reapOrphans({ client }))
    : await reapOrphans(values['base-url'] === undefined ? {} : { baseUrl: values['base-url'] });
  if (values.json) return printJson(report);
  const rows = [
    ...report.stopped.map((e) => ({ ...e, outcome: 'stopped' })),
    ...report.removed.map((e) => ({ ...e, outcome: 'forgotten (embedded server gone)' })),
    ...report.skipped.map((e) => ({ ...e, outcome: 'skipped (no API key for this server)' })),
    ...report.failed.map(({ entry, error }) => ({
      ...entry,
      outcome: `failed: ${error instanceof Error ? error.message : String(error)}`,
    })),
  ].map((e) => ({
    instance: e.instanceId,
    server: e.baseUrl,
    pid: String(e.pid),
    outcome: e.outcome,
  }));
  console.log(
    rows.length ? table(rows, ['instance', 'server', 'pid', 'outcome']) : 'no orphaned instances',
  );
  if (report.failed.length > 0) process.exitCode = 1;
}
