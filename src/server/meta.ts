/**
 * What `GET /v1/version` answers: burrow's version (its package.json), the API version
 * (src/api/meta.ts) and the Chromium of browser instances, asked of the binary once per path and
 * cached for the life of the process.
 */
import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { API_VERSION, type VersionResult } from '../api/index.js';

let packageVersion: string | undefined;

/**
 * burrow's version from the package.json above this module: two levels up from src/server/, three
 * from dist/src/server/.
 */
export function burrowVersion(): string {
  if (packageVersion !== undefined) return packageVersion;
  for (const up of ['../../package.json', '../../../package.json']) {
    const url = new URL(up, import.meta.url);
    if (!existsSync(url)) continue;
    const pkg = JSON.parse(readFileSync(url, 'utf8')) as { name?: string; version?: string };
    if (pkg.name === 'burrow-sandbox' && pkg.version) return (packageVersion = pkg.version);
  }
  return (packageVersion = '0.0.0-unknown');
}

const chromiumVersions = new Map<string, Promise<string | null>>();

/**
 * The version `chromium --version` prints (`Chromium 156.0.8078.79 …` → `156.0.8078.79`), or null
 * when the binary is missing or says nothing recognisable. Asked once per path.
 */
export function chromiumVersion(path: string): Promise<string | null> {
  let version = chromiumVersions.get(path);
  if (!version) {
    version = new Promise((resolve) => {
      if (!existsSync(path)) return resolve(null);
      const opts = { timeout: 10_000, env: { PATH: '/usr/bin:/bin' } };
      execFile(path, ['--version'], opts, (err, out) =>
        resolve(err ? null : (/(\d+(?:\.\d+){1,3})/.exec(out)?.[1] ?? null)),
      );
    });
    chromiumVersions.set(path, version);
    // no answer is not remembered: the binary may be installed while the server runs
    void version.then((v) => v === null && chromiumVersions.delete(path));
  }
  return version;
}

/** The body of `GET /v1/version`; `chromium` is null without a binary to ask. */
export async function versionInfo(chromiumPath: string | undefined): Promise<VersionResult> {
  return {
    burrow: burrowVersion(),
    api: API_VERSION,
    chromium: chromiumPath === undefined ? null : await chromiumVersion(chromiumPath),
  };
}
