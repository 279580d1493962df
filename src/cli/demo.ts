/**
 * `burrow demo`, the README's main job: log in on a local site in one remote browser, save the
 * auth state, open a second session with it applied and show that it is signed in.
 */
import { writeFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { performance } from 'node:perf_hooks';
import { embeddedServer, openSession, type PlaywrightSession } from '../session/index.js';
import { DEMO_PASSWORD, DEMO_USER, serveDemoSite } from './demo-site.js';

export const usage = `burrow demo [--screenshot PATH] [--state NAME]

Serves a small site with a login on 127.0.0.1, opens a remote browser session,
signs in (an HttpOnly cookie and a localStorage token), saves the auth state,
opens a second session on a fresh instance with that state applied and checks
that it is signed in, then writes a screenshot. Uses the embedded server unless
BURROW_BASE_URL is set. Exits 1 if the second session is not signed in.

  --screenshot PATH  where to write the PNG (default ./demo-screenshot.png)
  --state NAME       auth state name to save or update (default burrow-demo)`;

const STEPS = 10;
let done = 0;

/** Runs one step with a progress line: label, outcome, duration, detail. */
async function step<T>(label: string, fn: () => Promise<T>, detail?: (v: T) => string) {
  const head = `  ${++done}/${STEPS} ${label} `.padEnd(54, '.');
  process.stdout.write(`${head} `);
  const t0 = performance.now();
  try {
    const value = await fn();
    const ms = `${Math.round(performance.now() - t0)} ms`.padStart(8);
    process.stdout.write(`ok ${ms}  ${detail?.(value) ?? ''}`.trimEnd() + '\n');
    return value;
  } catch (err) {
    process.stdout.write('failed\n');
    throw err;
  }
}

async function signedIn(session: PlaywrightSession, siteUrl: string): Promise<[string, string]> {
  await session.page.goto(`${siteUrl}/account`);
  return [
    (await session.page.textContent('#status')) ?? '',
    (await session.page.textContent('#token')) ?? '',
  ];
}

export async function run(argv: string[]): Promise<void> {
  const { values } = parseArgs({
    args: argv,
    options: {
      screenshot: { type: 'string' },
      state: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) return console.log(usage);
  const shotPath = resolve(values.screenshot ?? 'demo-screenshot.png');
  const stateName = values.state ?? 'burrow-demo';
  const t0 = performance.now();
  console.log('burrow demo: sign in once, reuse the login in a fresh remote browser\n');

  await using site = await step('serve a local site with a login', serveDemoSite, (s) => s.url);
  const remote = process.env.BURROW_BASE_URL;
  await using _server = await step(
    remote ? 'use the server from BURROW_BASE_URL' : 'start the embedded burrow server',
    async () =>
      remote ? { url: remote, [Symbol.asyncDispose]: async () => {} } : embeddedServer(),
    (s) => s.url,
  );

  let saved;
  {
    await using first = await step(
      'open session 1 (Playwright)',
      () => openSession(),
      (s) => s.instance.id,
    );
    await step(
      `sign in as "${DEMO_USER}"`,
      async () => {
        const { page } = first;
        await page.goto(`${site.url}/login`);
        await page.fill('input[name=user]', DEMO_USER);
        await page.fill('input[name=password]', DEMO_PASSWORD);
        await page.click('button[type=submit]');
        await page.waitForSelector('#status:text("signed-in")');
      },
      () => 'HttpOnly cookie + localStorage token set',
    );
    saved = await step(
      `save the auth state "${stateName}"`,
      async () => {
        const existing = (await first.auth.list()).filter((s) => s.name === stateName);
        return existing[0]
          ? { ...(await first.auth.update(existing[0].id)), how: 'updated' }
          : { ...(await first.auth.save(stateName)), how: 'saved' };
      },
      (s) => `${s.how} ${s.id}`,
    );
    await step(
      'stop session 1',
      () => first.stop(),
      (s) => `${s.instanceId} ${s.status}`,
    );
  }

  await using second = await step(
    `open session 2 with authState "${stateName}"`,
    () => openSession({ authState: saved.id }),
    (s) => s.instance.id,
  );
  const [status, token] = await step(
    'check that session 2 is signed in',
    () => signedIn(second, site.url),
    (r) => r.join(', '),
  );
  await step(
    'save a screenshot of the instance',
    async () => writeFile(shotPath, await second.screenshot()),
    () => shotPath,
  );
  await step(
    'stop session 2',
    () => second.stop(),
    (s) => `${s.instanceId} ${s.status}`,
  );

  const total = ((performance.now() - t0) / 1000).toFixed(1);
  if (status === 'signed-in' && token === 'token-present') {
    console.log(
      `\ndone in ${total} s: a fresh browser on a new instance was signed in by the saved auth state.`,
    );
  } else {
    console.log(`\nfailed after ${total} s: session 2 is not signed in (${status}, ${token}).`);
    process.exitCode = 1;
  }
}
