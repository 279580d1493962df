/**
 * What a test's report gets from burrow: its video (or a note why there is none), and on failure
 * one screenshot. None of it throws: a report attachment that cannot be made is left out, never
 * turned into a second failure.
 *
 * No live-view URL: it works only while its instance runs, and a failed test's instance stops
 * right after it (its own with `instancePerTest`; the worker's because Playwright Test replaces a
 * worker after a failure, which stops the worker's session). To watch tests while they run, run
 * Playwright Test with `--headed`: each worker prints (and, on a desktop, opens) its live view.
 */
import type { TestInfo } from '@playwright/test';
import type { BrowserContext, Page } from 'playwright-core';
import type { PlaywrightSession } from 'burrow-sandbox';
import { playwrightScreenshots, shouldKeepVideo, shouldRecord, type VideoMode } from './options.js';

export interface TestArtifacts {
  /** Resolves once the recording of the context's first page runs (the `page` fixture waits). */
  ready(): Promise<void>;
  /** Attaches what the finished test should have; call before its context closes. */
  finish(): Promise<void>;
}

interface Plan {
  session: PlaywrightSession;
  context: BrowserContext;
  /** The test runs in the instance's default context (the one its screen and recorder show). */
  defaultContext: boolean;
  video: VideoMode;
  screenshot: unknown;
  testInfo: TestInfo;
}

const failed = (t: TestInfo) => t.status !== t.expectedStatus;

/** Starts what the test records (its video), and returns how to finish. */
export async function startTestArtifacts(plan: Plan): Promise<TestArtifacts> {
  if (!plan.defaultContext) skipIdleTabs(plan);
  const video = await startVideo(plan);
  return {
    ready: () => video.ready(),
    finish: async () => {
      const { testInfo } = plan;
      await video.finish().catch(() => undefined);
      if (!failed(testInfo)) return;
      await attachScreenshot(plan).catch(() => undefined);
    },
  };
}

/**
 * The video of one test: the instance's screen recording (src/session/artifacts.ts), which films
 * the browser's active tab, the page most recently opened or brought to front in any context. In
 * the default context that is the test's page from the start; a fresh context has no page yet, so
 * the recording starts when its first page opens (`ready()`, which the `page` fixture awaits so
 * the clip begins before the test's first step) and follows the pages the test opens after it.
 */
async function startVideo(
  plan: Plan,
): Promise<{ ready(): Promise<void>; finish(): Promise<void> }> {
  const { testInfo, video, session, context } = plan;
  if (!shouldRecord(video, testInfo.retry))
    return { ready: async () => {}, finish: async () => {} };
  const keep = () => shouldKeepVideo(video, failed(testInfo), testInfo.retry);
  let why: string | undefined;
  const start = async () => {
    try {
      await session.recording.start();
      return true;
    } catch (err) {
      why = `the instance could not start recording (${(err as Error).message})`;
      return false;
    }
  };
  let started: Promise<boolean> | undefined;
  const begin = () => (started ??= start());
  if (plan.defaultContext || context.pages().length > 0) await begin();
  else context.once('page', () => void begin());
  return {
    ready: async () => {
      await begin();
    },
    finish: async () => {
      const recording = started ? await started : false;
      if (!recording) {
        why ??= 'the test opened no page';
        if (keep()) {
          await testInfo.attach('video', {
            body: `video is not recorded: ${why}`,
            contentType: 'text/plain',
          });
        }
        return;
      }
      const clip = await session.recording.stop();
      if (!keep()) return;
      const path = testInfo.outputPath('video.mp4');
      await session.recording.save(clip.id, path);
      await testInfo.attach('video', { path, contentType: 'video/mp4' });
    },
  };
}

/**
 * One screenshot of the failed test, unless Playwright Test's own `screenshot` option takes it:
 * the test's page, or the instance's screen when the test has no open page in the default context.
 */
async function attachScreenshot(plan: Plan): Promise<void> {
  const { testInfo, context, session } = plan;
  if (playwrightScreenshots(plan.screenshot, true, testInfo.retry)) return;
  const page: Page | undefined = context.pages().find((p) => !p.isClosed());
  let body: Buffer;
  if (page) body = await page.screenshot({ timeout: 5_000, caret: 'initial' });
  else if (plan.defaultContext) body = await session.screenshot();
  else return;
  await testInfo.attach('screenshot', { body, contentType: 'image/png' });
}

/**
 * Playwright Test's own `screenshot` option captures every page this process knows, which over
 * CDP includes the instance's idle default tab: a test in a fresh context would get a second,
 * blank screenshot. Playwright skips a page it has already captured for the test, which it notes
 * with a per-test symbol on the page (`testInfo._uniqueSymbol`, not public API); this marks the
 * default context's tabs so. Where that field is missing, nothing is marked.
 */
function skipIdleTabs(plan: Plan): void {
  const mark = (plan.testInfo as { _uniqueSymbol?: unknown })._uniqueSymbol;
  if (typeof mark !== 'symbol') return;
  for (const page of plan.session.context.pages()) {
    (page as unknown as Record<symbol, boolean>)[mark] = true;
  }
}
