/**
 * Every BURROW_* variable the code reads is documented: the server's settings in
 * docs/configuration.md (kept equal to the schema by server-config.test.ts), the rest in README's
 * environment-variable table.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const root = new URL('../..', import.meta.url).pathname;
/** Names that look like variables but are not read from the environment. */
const NOT_VARIABLES = new Set([
  'BURROW_INSTANCE', // a marker on the sandbox's command line (sandbox.ts)
  'BURROW_UPLOAD_FAILED', // a process warning code (session/transfer.ts)
  'BURROW_DOWNLOAD_FAILED', // a process warning code (session/transfer.ts)
  'BURROW_AT_CAPACITY', // a process warning code (session/session.ts)
]);

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return files(path);
    return /\.(ts|mjs|sh)$/.test(name) ? [path] : [];
  });
}

describe('README and docs/configuration.md environment variables', () => {
  const readme = readFileSync(join(root, 'README.md'), 'utf8');
  const settings = readFileSync(join(root, 'docs/configuration.md'), 'utf8');
  const table =
    readme.slice(readme.indexOf('## Environment variables')) +
    settings.slice(settings.indexOf('<!-- settings:start -->'));
  const used = new Set<string>();
  for (const f of [
    ...files(join(root, 'src')),
    ...files(join(root, 'adapters')),
    join(root, 'scripts/setup.sh'),
  ]) {
    for (const m of readFileSync(f, 'utf8').matchAll(/\bBURROW_[A-Z0-9_]+\b/g)) {
      if (!NOT_VARIABLES.has(m[0])) used.add(m[0]);
    }
  }

  it('finds the variables (sanity check of this test)', () => {
    expect(used).toContain('BURROW_BASE_URL');
    expect(used.size).toBeGreaterThan(15);
  });

  it.each([...used].sort())('lists %s', (name) => {
    expect(table).toContain(`\`${name}\``);
  });
});
