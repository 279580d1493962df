/**
 * Non-422 HTTP errors (COMPAT.md decision): a status and a human `detail`, sent as
 * `{"detail": "..."}`. Never put the API key or a token in a detail.
 */
export class HttpError extends Error {
  constructor(
    readonly status: 400 | 401 | 404 | 413 | 429 | 500 | 503,
    readonly detail: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(detail);
    this.name = 'HttpError';
  }
}

/** 400: the operation is not allowed for this instance's type or state. */
export const badRequest = (detail: string) => new HttpError(400, detail);
/** 404: unknown instance, notebook, cell or auth state. */
export const notFound = (detail: string) => new HttpError(404, detail);
