#!/usr/bin/env node
/** The `burrow` command. Each subcommand lives in its own module, loaded on demand. */

interface Command {
  summary: string;
  load: () => Promise<{ run(argv: string[]): Promise<void>; usage: string }>;
}

const commands: Record<string, Command> = {
  serve: { summary: 'run the server', load: () => import('./serve.js') },
  doctor: {
    summary: 'what this machine has, what is missing, which isolation guarantees hold',
    load: () => import('./doctor.js'),
  },
  demo: {
    summary: 'log in on a local site, save the auth state, reuse it in a new session',
    load: () => import('./demo.js'),
  },
  start: {
    summary: 'start an instance',
    load: () => import('./instances.js').then((m) => ({ run: m.start, usage: m.startUsage })),
  },
  list: {
    summary: 'list instances',
    load: () => import('./instances.js').then((m) => ({ run: m.list, usage: m.listUsage })),
  },
  get: {
    summary: 'show one instance',
    load: () => import('./instances.js').then((m) => ({ run: m.get, usage: m.getUsage })),
  },
  stop: {
    summary: 'stop instances',
    load: () => import('./instances.js').then((m) => ({ run: m.stop, usage: m.stopUsage })),
  },
  auth: {
    summary: 'saved browser auth states: list, export, import, delete, rotate-key',
    load: () => import('./auth.js'),
  },
  profiles: {
    summary: 'persistent browser profiles: list, delete',
    load: () => import('./profiles.js'),
  },
  keys: {
    summary: 'API keys of projects on a cluster: create, list, revoke',
    load: () => import('./keys.js'),
  },
  mcp: {
    summary: 'MCP server on stdio for agent hosts (tools over instances)',
    load: () => import('./mcp.js'),
  },
  drain: {
    summary: 'drain a server: no new instances, exit once the running ones ended',
    load: () => import('./drain.js'),
  },
  reap: {
    summary: 'stop instances left behind by processes that died',
    load: () => import('./reap.js'),
  },
};

function help(): string {
  const rows = Object.entries(commands).map(([name, c]) => `  ${name.padEnd(10)} ${c.summary}`);
  return `usage: burrow <command> [options]\n\ncommands:\n${rows.join('\n')}\n\nburrow <command> --help for a command's options; burrow --version for the version.`;
}

async function main(argv: string[]): Promise<void> {
  const [name, ...rest] = argv;
  if (name === undefined || name === '--help' || name === '-h' || name === 'help') {
    console.log(help());
    return;
  }
  if (name === '--version' || name === '-V' || name === 'version') {
    const { burrowVersion } = await import('../server/meta.js');
    console.log(burrowVersion());
    return;
  }
  const command = commands[name];
  if (!command) {
    console.error(`burrow: unknown command "${name}"\n\n${help()}`);
    process.exitCode = 2;
    return;
  }
  const mod = await command.load();
  await mod.run(rest);
}

main(process.argv.slice(2)).catch((err: unknown) => {
  console.error(`burrow: ${err instanceof Error ? err.message : String(err)}`);
  process.exitCode = 1;
});
