import { parseArgs } from 'node:util';
import { startServer } from '../server/index.js';

export const usage = `burrow serve [--host 127.0.0.1] [--port 8787] [--api-key K] [--data-dir D]
            [--max-instances N] [--public-url URL] [--log-level warn]

Runs the Remote Instance Control Service. The API key comes from --api-key, else
BURROW_API_KEY, else a random one printed once at start.`;

export async function run(argv: string[]): Promise<void> {
  const { values } = parseArgs({
    args: argv,
    options: {
      host: { type: 'string' },
      port: { type: 'string' },
      'api-key': { type: 'string' },
      'data-dir': { type: 'string' },
      'max-instances': { type: 'string' },
      'public-url': { type: 'string' },
      'log-level': { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) {
    console.log(usage);
    return;
  }
  const port = values.port === undefined ? undefined : Number(values.port);
  if (port !== undefined && (!Number.isInteger(port) || port < 0 || port > 65535)) {
    throw new Error(`--port must be an integer from 0 to 65535, not "${values.port}"`);
  }
  const maxInstances =
    values['max-instances'] === undefined ? undefined : Number(values['max-instances']);
  if (maxInstances !== undefined && (!Number.isInteger(maxInstances) || maxInstances < 1)) {
    throw new Error('--max-instances must be a positive integer');
  }
  const generated = !values['api-key'] && !process.env.BURROW_API_KEY;
  const server = await startServer({
    ...(values.host !== undefined && { host: values.host }),
    ...(port !== undefined && { port }),
    ...(values['api-key'] !== undefined && { apiKey: values['api-key'] }),
    ...(values['data-dir'] !== undefined && { dataDir: values['data-dir'] }),
    ...(maxInstances !== undefined && { maxInstances }),
    ...(values['public-url'] !== undefined && { publicUrl: values['public-url'] }),
    ...(values['log-level'] !== undefined && { logLevel: values['log-level'] }),
  });
  if (generated) console.log(`API key (generated, shown once): ${server.apiKey}`);
  console.log(`burrow listening on ${server.url} (data dir ${server.dataDir})`);

  let stopping = false;
  const stop = (signal: NodeJS.Signals) => {
    if (stopping) return;
    stopping = true;
    console.log(`${signal}: stopping every instance…`);
    server.close().then(
      () => process.exit(0),
      (err: unknown) => {
        console.error(err);
        process.exit(1);
      },
    );
  };
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
}
