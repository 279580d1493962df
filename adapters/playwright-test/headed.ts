/**
 * `--headed` on a remote browser: there is no local window to show, so each session prints the
 * URL of its instance's live view (a page that shows the browser and takes input) and, where a
 * desktop can show it, opens it in the user's own browser. `BURROW_OPEN_LIVE_VIEW=0` keeps it
 * to the printed line.
 */
import { spawn } from 'node:child_process';
import type { PlaywrightSession } from 'burrow-sandbox';

export async function showLiveView(session: PlaywrightSession): Promise<void> {
  let url: string;
  try {
    url = await session.streamUrl();
  } catch (err) {
    process.stderr.write(
      `burrow: --headed: no live view for instance ${session.instance.id} (${(err as Error).message}); the tests run headless there\n`,
    );
    return;
  }
  const opened = process.env.BURROW_OPEN_LIVE_VIEW !== '0' && openInBrowser(url);
  process.stderr.write(
    `burrow: --headed: the browser runs on instance ${session.instance.id}; ${opened ? 'opening' : 'watch it at'} its live view: ${url}\n`,
  );
}

/** Hand `url` to the desktop's browser; false where there is no desktop to show it on. */
function openInBrowser(url: string): boolean {
  const linuxDesktop = Boolean(process.env.DISPLAY || process.env.WAYLAND_DISPLAY);
  const command =
    process.platform === 'darwin'
      ? ['open', url]
      : process.platform === 'win32'
        ? ['cmd', '/c', 'start', '""', url]
        : linuxDesktop
          ? ['xdg-open', url]
          : undefined;
  if (!command) return false;
  try {
    const child = spawn(command[0]!, command.slice(1), { stdio: 'ignore', detached: true });
    child.on('error', () => {}); // no opener installed: the printed line is all there is
    child.unref();
    return true;
  } catch {
    return false;
  }
}
