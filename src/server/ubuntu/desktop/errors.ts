/** A tool failure a computer action reports in `error` (HTTP 200), as opposed to a server fault. */
export class ActionError extends Error {
  override name = 'ActionError';
}
