/** `burrow profiles [list | delete NAME]`: the server's persistent browser profiles. */
import { parseArgs } from 'node:util';
import { apiFlags, apiFlagsUsage, printJson, table, UsageError, withClient } from './common.js';

export const usage = `burrow profiles [list | delete NAME] [options]

Lists the server's persistent browser profiles (name, sealed size, last save, the instance
holding it), or deletes one (refused while an instance holds it). Start an instance with one
through \`profile: { name, save_changes }\` of POST /v1/start or openSession({ profile }).

${apiFlagsUsage}`;

export async function run(argv: string[]): Promise<void> {
  const { values, positionals } = parseArgs({
    args: argv,
    options: { ...apiFlags },
    allowPositionals: true,
  });
  if (values.help) return console.log(usage);
  const [command = 'list', name, ...rest] = positionals;
  const bad = () => new UsageError(`usage:\n${usage.split('\n\n')[0]}`);
  if (rest.length > 0) throw bad();
  switch (command) {
    case 'list': {
      if (name !== undefined) throw bad();
      const profiles = await withClient(values, (api) => api.profiles.list());
      if (values.json) return printJson(profiles);
      // a cluster's admin sees every project's profiles: then a column says whose each is
      const projects = profiles.some((p) => p.project !== undefined);
      console.log(
        table(
          profiles.map((p) => ({
            name: p.name,
            ...(projects && { project: p.project ?? '-' }),
            size: String(p.size_bytes),
            updated: p.updated_at,
            'in use by': p.in_use_by ?? '-',
          })),
          [...(projects ? ['name', 'project'] : ['name']), 'size', 'updated', 'in use by'],
        ),
      );
      return;
    }
    case 'delete': {
      if (name === undefined) throw bad();
      await withClient(values, (api) => api.profiles.delete(name));
      console.log(`deleted profile ${name}`);
      return;
    }
    default:
      throw bad();
  }
}
