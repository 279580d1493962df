/**
 * What both instance types do with a Chromium (docs/architecture.md): launch (its options built
 * for both in one place, in-sandbox.ts), the CDP client, the authenticated relay behind
 * `cdp_url`, input, screenshots and screencast, auth-state capture and apply, and the public URLs
 * of an instance (urls.ts). The `browser` runtime runs the controller headless; the ubuntu
 * runtime runs it headful on its display.
 */
export { BrowserController, type BrowserControllerOptions } from './controller.js';
export { ChromiumSession, type ChromiumOptions, type ChromiumSessionOptions } from './session.js';
export {
  chromiumInSandbox,
  chromiumSandbox,
  type ChromiumInstance,
  type ChromiumSandbox,
  type InSandboxOptions,
} from './in-sandbox.js';
export { cdpRelayUrl, liveViewUrl } from './urls.js';
export {
  BASE_FLAGS,
  launchChromium,
  normalizeBlockedDomain,
  type LaunchOptions,
  type LaunchedChromium,
} from './chromium.js';
export { CdpComputer } from './input.js';
export {
  CHROMIUM_DIR,
  CHROMIUM_DIRS,
  keepInTemplate,
  PROFILE_DIR,
  ProfileTemplate,
  type TemplateEntry,
} from './profile-template.js';
export { Screencast } from './screencast.js';
