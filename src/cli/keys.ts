/** `burrow keys [list | create --project P [--name N] | revoke ID]`: API keys of projects. */
import { parseArgs } from 'node:util';
import { apiFlags, apiFlagsUsage, printJson, table, UsageError, withClient } from './common.js';

export const usage = `burrow keys [list | create --project P [--name N] | revoke ID] [options]

API keys of projects on a cluster (serve --cluster), managed with the admin key (the server's
own --api-key). A project's key sees and controls only that project's instances and auth
states. create prints the new key once: the server keeps only a digest of it. revoke stops a
key on every node at once.

  --project P      create: the project the key belongs to
  --name N         create: what the key is for, shown by list
${apiFlagsUsage}`;

export async function run(argv: string[]): Promise<void> {
  const { values, positionals } = parseArgs({
    args: argv,
    options: { ...apiFlags, project: { type: 'string' }, name: { type: 'string' } },
    allowPositionals: true,
  });
  if (values.help) return console.log(usage);
  const [command = 'list', id, ...rest] = positionals;
  const bad = () => new UsageError(`usage:\n${usage.split('\n\n')[0]}`);
  if (rest.length > 0) throw bad();
  const createOnly = values.project !== undefined || values.name !== undefined;
  switch (command) {
    case 'list': {
      if (id !== undefined || createOnly) throw bad();
      const keys = await withClient(values, (api) => api.keys.list());
      if (values.json) return printJson(keys);
      console.log(
        table(
          keys.map((k) => ({
            id: k.id,
            project: k.project,
            name: k.name ?? '-',
            created: k.created_at,
            key: `…${k.last4}`,
            revoked: k.revoked_at ?? '-',
          })),
          ['id', 'project', 'name', 'created', 'key', 'revoked'],
        ),
      );
      return;
    }
    case 'create': {
      if (id !== undefined || values.project === undefined) throw bad();
      const { project, name } = values;
      const created = await withClient(values, (api) =>
        api.keys.create({ project, ...(name !== undefined && { name }) }),
      );
      if (values.json) return printJson(created);
      console.log(created.key);
      console.error(
        `key ${created.id} of project ${created.project}: shown this once, keep it now`,
      );
      return;
    }
    case 'revoke': {
      if (id === undefined || createOnly) throw bad();
      await withClient(values, (api) => api.keys.revoke(id));
      console.log(`revoked key ${id}`);
      return;
    }
    default:
      throw bad();
  }
}
