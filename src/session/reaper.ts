/** `reapOrphans` (and `burrow reap`): stop instances whose session's process is gone. */
import { Burrow, NotFoundError } from '../client/index.js';
import { Ledger, reap, type ReapReport } from './ledger.js';

export type { LedgerEntry, ReapReport } from './ledger.js';

/** Stops an instance; one the server does not know any more (404) counts as stopped: `gone`. */
export async function stopInstance(
  client: Burrow,
  instanceId: string,
  timeoutMs = 30_000,
): Promise<'terminated' | 'gone'> {
  try {
    await client.instances.stop(instanceId, { timeoutMs });
    return 'terminated';
  } catch (err) {
    if (err instanceof NotFoundError) return 'gone';
    throw err;
  }
}

export interface ReapOptions {
  /** Server whose orphans to stop. Default env `BURROW_BASE_URL`. */
  baseUrl?: string;
  /** Its API key. Default env `BURROW_API_KEY`. */
  apiKey?: string;
  /** A client to stop them with, instead of `baseUrl` and `apiKey`. */
  client?: Burrow;
  /** The ledger's directory. Default `<data dir>/sessions` (env `BURROW_DATA_DIR`). */
  ledgerDir?: string;
}

/**
 * Reads the ledger and, for every instance whose owning process is gone: stops it if it is on
 * the given server (a 404 counts as stopped), or just forgets it if it was on that process's
 * embedded server (which died with it). Orphans on other servers are reported as skipped: the
 * API key is only ever sent to the server it belongs to.
 */
export async function reapOrphans(options: ReapOptions = {}): Promise<ReapReport> {
  const baseUrl = options.baseUrl ?? (process.env.BURROW_BASE_URL || undefined);
  const apiKey = options.apiKey ?? (process.env.BURROW_API_KEY || undefined);
  const client =
    options.client ?? (baseUrl && apiKey ? new Burrow({ baseUrl, apiKey }) : undefined);
  try {
    const stop = async (id: string) => {
      try {
        await client!.instances.stop(id, { timeoutMs: 30_000 });
      } catch (err) {
        if (!(err instanceof NotFoundError)) throw err;
      }
    };
    return await reap(new Ledger(options.ledgerDir), client && { baseUrl: client.baseUrl, stop });
  } finally {
    if (client && !options.client) await client.close();
  }
}
