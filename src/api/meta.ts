/**
 * burrow extension: what the service says about itself (`GET /v1/version`). Not in
 * docs/spec/API.md, whose interface version is `API_VERSION`.
 */
import { z } from 'zod';

/** The version label of the interface burrow implements (docs/spec/API.md, "Versioning"). */
export const API_VERSION = '1.0.0';

export const VersionResult = z.looseObject({
  /** burrow's own version, e.g. `0.1.0` (the npm package's). */
  burrow: z.string(),
  /** The version of the API description it implements: `API_VERSION`. */
  api: z.string(),
  /**
   * The Chromium that `browser` instances run, e.g. `156.0.8078.79`; null when this server has
   * none (its `browser` instances are then unavailable).
   */
  chromium: z.string().nullable(),
});
export type VersionResult = z.output<typeof VersionResult>;
