// @ts-check
/**
 * Mutation testing of the security modules (issue 18): `npm run mutation:security`.
 * Not part of `npm test` (a run takes many minutes); prints the score per file and writes
 * reports/mutation/security.html and .json.
 *
 * Parts of larger files are mutated by line range (`file.ts:from-to`); the ranges are found
 * here from the source text, so they follow the code when lines above them move.
 */
import { readFileSync } from 'node:fs';

/**
 * `file:from-to` covering the declaration whose line matches `start` (first match) up to its
 * closing line: the next line that is the same indentation followed by `}` (or `});`).
 * @param {string} file @param {RegExp} start @returns {string}
 */
function span(file, start) {
  const lines = readFileSync(new URL(file, import.meta.url), 'utf8').split('\n');
  const from = lines.findIndex((l) => start.test(l));
  if (from < 0) throw new Error(`stryker.config.mjs: ${start} not found in ${file}`);
  const indent = /^\s*/.exec(lines[from] ?? '')?.[0] ?? '';
  const to = lines.findIndex((l, i) => i > from && new RegExp(`^${indent}\\}\\)?;?$`).test(l));
  if (to < 0) throw new Error(`stryker.config.mjs: end of ${start} not found in ${file}`);
  return `${file}:${from + 1}-${to + 1}`;
}

const ARTIFACT = 'src/server/artifacts/instance.ts';
const ARTIFACT_FILES = 'src/server/artifacts/safe-files.ts';
const ARTIFACT_NAMES = 'src/server/artifacts/names.ts';
const APP = 'src/server/http/app.ts';

/** @type {import('@stryker-mutator/api/core').PartialStrykerOptions} */
export default {
  testRunner: 'vitest',
  vitest: { configFile: 'stryker.vitest.config.mjs', related: true },
  plugins: ['@stryker-mutator/vitest-runner'],
  coverageAnalysis: 'perTest',
  mutate: [
    'src/server/sandbox/seccomp.ts',
    'src/server/sandbox/egress/policy.ts',
    'src/server/sandbox/egress/address.ts',
    'src/server/sandbox/egress/host-routes.ts',
    'src/server/sandbox/egress/host-lines.ts',
    'src/server/sandbox/egress/sni.ts',
    'src/server/toolbox/frames.ts',
    'src/server/toolbox/fsops.ts',
    'src/server/toolbox/paths.ts',
    // the DevTools multiplexer: routing, its clients, the messages it reads, navigation traps
    'src/server/chromium/mux.ts',
    'src/server/chromium/mux-client.ts',
    'src/server/chromium/inbound.ts',
    // a relay client's frames unmasked as they arrive (its lengths and keys are the client's)
    'src/server/chromium/unmask.ts',
    'src/server/chromium/wire.ts',
    'src/server/chromium/command.ts',
    'src/server/chromium/trap.ts',
    'src/server/chromium/refusals.ts',
    'src/api/cdp-limits.ts',
    'src/server/sandbox/subid-ranges.ts',
    'src/server/auth-states/store.ts',
    'src/server/auth-states/secret-key.ts',
    // the bound on what an instance can make the server log
    'src/internal/log-budget.ts',
    // the main thread's time shared among clients' long work and bytes
    'src/internal/cpu-share.ts',
    // artifacts: the checks on what is opened and named
    span(ARTIFACT, /^ {2}async open\(kind/),
    span(ARTIFACT, /^ {2}async #openFile\(/),
    span(ARTIFACT_FILES, /^export async function safeOpen\(/),
    span(ARTIFACT_NAMES, /^export function safeFilename\(/),
    span(ARTIFACT_NAMES, /^export function contentDisposition\(/),
    // the API key and the per-instance (cdp_url, live-view) token
    span(APP, /^export function safeEqual\(/),
    span(APP, /^ {2}app\.addHook\('onRequest', async \(req\) => \{$/),
    span(APP, /^export const WEBSOCKET_ROUTES\b/),
    span(APP, /^export function handleUpgrade\(/),
    span(APP, /^export function registerStreamPages\(/),
  ],
  // two cores shared with other work
  concurrency: 1,
  timeoutMS: 5_000,
  timeoutFactor: 1.5,
  // the sandbox copy needs only what the unit tests import
  ignorePatterns: [
    '/dist',
    '/coverage',
    '/test-results',
    '/playwright-report',
    '/reports',
    '/.burrow-data',
    '/.scratch',
    '/bench',
    '/examples',
    '/test/integration',
    '/test/e2e',
  ],
  reporters: ['clear-text', 'progress', 'html', 'json'],
  htmlReporter: { fileName: 'reports/mutation/security.html' },
  jsonReporter: { fileName: 'reports/mutation/security.json' },
  clearTextReporter: { allowColor: false, logTests: false, reportScoreTable: true },
  thresholds: { high: 90, low: 80, break: null },
  tempDirName: '.stryker-tmp',
  cleanTempDir: true,
};
