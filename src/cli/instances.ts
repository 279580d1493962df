/** `burrow start | list | get | stop`: instance lifecycle by hand, through the client. */
import type { StartRequest } from '../client/index.js';
import { parseArgs } from 'node:util';
import {
  apiFlags,
  apiFlagsUsage,
  printInstances,
  printJson,
  UsageError,
  withClient,
} from './common.js';

export const startUsage = `burrow start [--type browser|ubuntu|windows] [--timeout-hours H]
             [--resolution WxH] [--blocked-domain HOST]... [options]

Starts an instance and prints it. It runs until \`burrow stop ID\` or its timeout
(default 1 hour); it is not tied to this command's process.

${apiFlagsUsage}`;

export async function start(argv: string[]): Promise<void> {
  const { values } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      ...apiFlags,
      type: { type: 'string' },
      'timeout-hours': { type: 'string' },
      resolution: { type: 'string' },
      'blocked-domain': { type: 'string', multiple: true },
    },
  });
  if (values.help) return console.log(startUsage);
  const body: StartRequest = { instance_type: (values.type ?? 'browser') as 'browser' };
  if (values['timeout-hours'] !== undefined) {
    const hours = Number(values['timeout-hours']);
    if (!Number.isFinite(hours)) throw new UsageError('--timeout-hours must be a number');
    body.timeout_hours = hours;
  }
  if (values.resolution !== undefined) {
    const m = /^(\d+)x(\d+)$/.exec(values.resolution);
    if (!m) throw new UsageError('--resolution must look like 1280x720');
    body.resolution = [Number(m[1]), Number(m[2])];
  }
  if (values['blocked-domain']) body.blocked_domains = values['blocked-domain'];
  await withClient(values, async (api) =>
    printInstances([await api.instances.start(body)], values.json),
  );
}

export const listUsage = `burrow list [--live] [options]

Lists the server's instances (terminated ones too, unless --live).

${apiFlagsUsage}`;

export async function list(argv: string[]): Promise<void> {
  const { values } = parseArgs({
    args: argv,
    options: { ...apiFlags, live: { type: 'boolean' } },
  });
  if (values.help) return console.log(listUsage);
  await withClient(values, async (api) => {
    const all = await api.instances.list();
    const shown = values.live
      ? all.filter((i) => ['deploying', 'running', 'paused'].includes(i.status))
      : all;
    printInstances(shown, values.json);
  });
}

export const getUsage = `burrow get ID [options]

Prints one instance.

${apiFlagsUsage}`;

export async function get(argv: string[]): Promise<void> {
  const { values, positionals } = parseArgs({
    args: argv,
    options: apiFlags,
    allowPositionals: true,
  });
  if (values.help) return console.log(getUsage);
  const [id, ...extra] = positionals;
  if (id === undefined || extra.length > 0)
    throw new UsageError(`usage: ${getUsage.split('\n')[0]}`);
  await withClient(values, async (api) =>
    printInstances([await api.instances.get(id)], values.json),
  );
}

export const stopUsage = `burrow stop ID... [options]

Stops instances; stopping one that is already terminated is not an error.

${apiFlagsUsage}`;

export async function stop(argv: string[]): Promise<void> {
  const { values, positionals } = parseArgs({
    args: argv,
    options: apiFlags,
    allowPositionals: true,
  });
  if (values.help) return console.log(stopUsage);
  if (positionals.length === 0) throw new UsageError(`usage: ${stopUsage.split('\n')[0]}`);
  await withClient(values, async (api) => {
    const results = [];
    for (const id of positionals) results.push({ id, ...(await api.instances.stop(id)) });
    if (values.json) printJson(results);
    else for (const r of results) console.log(`${r.id}  ${r.status}`);
  });
}
