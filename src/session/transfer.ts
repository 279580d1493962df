/**
 * File transfer for the bridge: local files into the remote browser's file inputs, and the remote
 * browser's downloads onto this machine, so that a script behaves as with a local browser.
 *
 * The driver (Playwright or Puppeteer) connects to a small CDP proxy in this process (a loopback
 * WebSocket with a random path) instead of the instance's `cdp_url`; the proxy relays every
 * message unchanged except:
 *
 * - `DOM.setFileInputFiles` (Playwright's `setInputFiles` / `fileChooser.setFiles`, Puppeteer's
 *   `uploadFile` / `fileChooser.accept`): each path that names a file (or directory) on this
 *   machine is streamed to the instance first with the `upload` operation, into
 *   `~/.burrow/uploads/<random>/<name>`, and the command goes on with the in-instance paths. A path
 *   that exists only in the instance passes unchanged. The same unchanged file is sent once per
 *   session.
 * - `Browser.setDownloadBehavior` / `Page.setDownloadBehavior` with `allow` or `allowAndName` and a
 *   `downloadPath`: the proxy notes the local directory and asks for download events (the server
 *   keeps the bytes in the instance, src/server/chromium/downloads.ts). When a download
 *   completes, the proxy fetches its bytes from `GET /v1/instance/{id}/downloads/{guid}` and writes
 *   them where a local Chromium would have (`<downloadPath>/<guid>` for `allowAndName`, as
 *   Playwright expects; `<downloadPath>/<suggested name>` for `allow`, as Puppeteer users expect)
 *   before the driver sees `downloadProgress: completed`. Events the driver did not ask for are
 *   not passed on. A download whose bytes cannot be fetched reaches the driver as `canceled`, at
 *   once, and a process warning (`BURROW_DOWNLOAD_FAILED`) says why.
 *
 * Only messages that may concern these are decoded: commands are searched for the method names
 * (Buffer search), events are recognised by their first bytes; everything else is forwarded as it
 * came. The proxy accepts only loopback connections on its random path, and lives as long as the
 * driver's connection.
 *
 * Here: connecting a driver through the proxy. The listener is transfer-proxy.ts, one relayed
 * connection and its rewriting transfer-link.ts, what it asks of the API and the session's cache
 * of sent files transfer-api.ts, local file names transfer-files.ts. Message sizes are the
 * server relay's own, each way (src/api/cdp-limits.ts).
 */
import type { DriverConnectOptions, DriverConnection } from './driver.js';
import type { TransferSetup } from './transfer-api.js';
import { TransferProxy } from './transfer-proxy.js';

export {
  clientTransferApi,
  transferSetup,
  UploadCache,
  type TransferApi,
  type TransferSetup,
} from './transfer-api.js';
export { safeName } from './transfer-files.js';
export { TransferProxy, type TransferProxyOptions } from './transfer-proxy.js';

/**
 * Connects a driver to `cdpUrl`: through a transfer proxy when `transfer` is given (the proxy
 * closes with the connection), else directly. `local` tells the driver that the browser sees this
 * machine's files (Playwright then passes paths to `DOM.setFileInputFiles`, which the proxy
 * uploads, instead of the file's bytes inlined in the page, limited to 50 MB).
 */
export async function connectDriver(
  driver: { connect(url: string, options?: DriverConnectOptions): Promise<DriverConnection> },
  cdpUrl: string,
  options: DriverConnectOptions,
  transfer: TransferSetup | undefined,
): Promise<DriverConnection> {
  if (!transfer) return driver.connect(cdpUrl, options);
  const proxy = await TransferProxy.open({ cdpUrl, ...transfer });
  try {
    const conn = await driver.connect(proxy.url, { ...options, local: true });
    void conn.closed.then(() => proxy.close());
    return conn;
  } catch (err) {
    await proxy.close();
    throw err;
  }
}
