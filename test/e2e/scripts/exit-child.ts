/**
 * A script as users write them, for test/e2e/script-exit.test.ts. It opens a session (server
 * from BURROW_BASE_URL / BURROW_API_KEY, or the embedded one), prints `ready <instance id>`, then:
 *   forget  runs a 2 s `evaluate` (a driver call in flight, nothing else holding the process),
 *           prints `evaluated`, and ends without calling stop(); on an ubuntu instance
 *           (EXIT_CHILD_TYPE=ubuntu) also a computer action first
 *   close   as forget, then `browser.close()` (over CDP only a disconnect), still no stop()
 *   wait    waits in a driver call (waitForTimeout) until it is signalled
 */
import { openSession } from 'burrow-sandbox';

const mode = process.argv[2] ?? 'forget';
const instanceType = process.env.EXIT_CHILD_TYPE === 'ubuntu' ? 'ubuntu' : 'browser';
const session = await openSession({ instanceType });
console.log(`ready ${session.id}`);
if (mode === 'forget' || mode === 'close') {
  if (instanceType === 'ubuntu') {
    await session.computer({ action: 'get_cursor_position' });
  }
  const v = await session.page.evaluate(
    () => new Promise<number>((resolve) => setTimeout(() => resolve(42), 2000)),
  );
  console.log(`evaluated ${v}`);
  if (mode === 'close') await session.browser.close();
} else {
  await session.page.waitForTimeout(120_000);
  console.log('the wait ended');
}
