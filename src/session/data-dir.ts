import { homedir } from 'node:os';
import { join } from 'node:path';

/**
 * The data dir, as the server computes it (kept in step with `defaultDataDir` in
 * src/server/config.ts, which session may not import statically): `BURROW_DATA_DIR`, else
 * `$XDG_DATA_HOME/burrow`, else `~/.local/share/burrow`.
 */
export function dataDir(): string {
  if (process.env.BURROW_DATA_DIR) return process.env.BURROW_DATA_DIR;
  return join(process.env.XDG_DATA_HOME || join(homedir(), '.local', 'share'), 'burrow');
}
