/** `burrow start | list | get | stop`: instance lifecycle by hand, through the client. */
import type { Instance, StartRequest } from '../client/index.js';
import { parseArgs } from 'node:util';
import {
  apiFlags,
  apiFlagsUsage,
  printInstances,
  printJson,
  UsageError,
  withClient,
  withServerOrDataDir,
} from './common.js';

export const startUsage = `burrow start [--type browser|ubuntu|windows] [--timeout-hours H]
             [--resolution WxH] [--blocked-domain HOST]... [options]

Starts an instance and prints it. It runs until \`burrow stop ID\` or its timeout
(default 1 hour); it is not tied to this command's process. --type defaults to browser, as
openSession does (the API's own default, without instance_type, is ubuntu).

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

export const listUsage = `burrow list [--live] [--data-dir DIR] [options]

Lists the server's instances (terminated ones too, unless --live). Without a server (no
--base-url or BURROW_BASE_URL, and none at the default address), or with --data-dir, lists the
instances of the embedded servers using the data dir (BURROW_DATA_DIR, else
$XDG_DATA_HOME/burrow): those of scripts running openSession, with the pid of their process.

${apiFlagsUsage}
  --data-dir DIR   read this data dir instead of asking a server`;

export async function list(argv: string[]): Promise<void> {
  const { values } = parseArgs({
    args: argv,
    options: { ...apiFlags, live: { type: 'boolean' }, 'data-dir': { type: 'string' } },
  });
  if (values.help) return console.log(listUsage);
  const all: Instance[] = await withServerOrDataDir(
    values,
    (api) => api.instances.list(),
    async (dir) => (await import('./offline.js')).instancesInDataDir(dir),
  );
  const shown = values.live
    ? all.filter((i) => ['deploying', 'running', 'paused'].includes(i.status))
    : all;
  printInstances(shown, values.json);
}

export const getUsage = `burrow get ID [options]

Prints one instance and, while it runs, its cdp_url and live-view URL (both carry the
instance's token: keep them secret). For an ubuntu instance the cdp_url is shown once its
desktop browser runs (browser/start).

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
  await withClient(values, async (api) => {
    const instance = await api.instances.get(id);
    const running = instance.status === 'running';
    // best effort: a browser that is not running has no cdp_url, a type may have no live view
    const [cdp, live] = running
      ? await Promise.all([
          api.browser.cdpUrl(id).then(
            (r) => r.cdp_url,
            () => undefined,
          ),
          api.instance.streamUrl(id).then(
            (r) => r.stream_url,
            () => undefined,
          ),
        ])
      : [undefined, undefined];
    if (values.json) {
      // an array, as start and list print
      return printJson([
        {
          ...instance,
          ...(cdp !== undefined && { cdp_url: cdp }),
          ...(live !== undefined && { stream_url: live }),
        },
      ]);
    }
    printInstances([instance], false);
    if (cdp !== undefined) console.log(`\ncdp_url:   ${cdp}`);
    if (live !== undefined) console.log(`${cdp === undefined ? '\n' : ''}live view: ${live}`);
  });
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
