/** `burrow auth list`: the saved browser auth states. */
import { parseArgs } from 'node:util';
import { apiFlags, apiFlagsUsage, printJson, table, UsageError, withClient } from './common.js';

export const usage = `burrow auth list [options]

Lists saved browser auth states (id and name). Sessions apply one with
openSession({ authState: 'id or name' }).

${apiFlagsUsage}`;

export async function run(argv: string[]): Promise<void> {
  const { values, positionals } = parseArgs({
    args: argv,
    options: apiFlags,
    allowPositionals: true,
  });
  if (values.help) return console.log(usage);
  if (positionals.join(' ') !== 'list') throw new UsageError(`usage: ${usage.split('\n')[0]}`);
  await withClient(values, async (api) => {
    const states = await api.authStates.list();
    if (values.json) return printJson(states);
    console.log(
      table(
        states.map((s) => ({ id: s.id, name: s.name ?? '' })),
        ['id', 'name'],
      ),
    );
  });
}
