/**
 * burrow extensions for browser extensions (not in docs/spec/API.md): upload an unpacked
 * extension as a zip archive, list and delete what was uploaded; `POST /v1/start` names them in
 * `extensions` (src/api/schemas.ts). Chromium loads Manifest V3 extensions only.
 */
import { z } from 'zod';

/** What the server keeps of an uploaded extension; its fields come from its `manifest.json`. */
export const ExtensionInfo = z.looseObject({
  /** `ext_` and 16 hex digits. */
  id: z.string(),
  name: z.string(),
  version: z.string(),
  manifest_version: z.int(),
  description: z.string().nullable(),
  /** The uploaded file's name, when the upload gave one. */
  filename: z.string().nullable(),
  /** Unpacked size in bytes. */
  size_bytes: z.int(),
  /** ISO 8601 */
  created_at: z.string(),
});
export type ExtensionInfo = z.output<typeof ExtensionInfo>;

/** An extension id as routes and `POST /v1/start` take it. */
export const ExtensionId = z.string().min(1).max(64);

export const ExtensionPath = z.object({ extension_id: ExtensionId });

/** The multipart fields besides the `file` part (a zip archive): none. */
export const ExtensionUploadFields = z.object({});
export type ExtensionUploadFields = z.input<typeof ExtensionUploadFields>;

export const DeleteExtensionResult = z.looseObject({ status: z.literal('success') });

// ---------------------------------------------------------------------------------------------
// Persistent browser profiles (`profile` of `POST /v1/start`)

/** A profile's name: letters, digits, `.`, `_`, `-`, at most 64, not starting with a dot. */
export const ProfileName = z
  .string()
  .regex(/^[A-Za-z0-9_-][A-Za-z0-9._-]{0,63}$/, 'letters, digits, ".", "_" and "-", at most 64');

/** `profile` of `POST /v1/start`: the browser's whole profile, restored and maybe saved back. */
export const StartProfile = z.object({
  name: ProfileName,
  /** Write the profile back when the instance stops. Default false. */
  save_changes: z.boolean().default(false),
});

export const ProfileInfo = z.looseObject({
  name: z.string(),
  /** Size of the sealed file in bytes. */
  size_bytes: z.int(),
  /** ISO 8601: when it was last saved. */
  updated_at: z.string(),
  /** The live instance holding it, if any. */
  in_use_by: z.string().nullable(),
  /**
   * Cluster mode, the admin's list: the project the profile belongs to (absent for the admin's
   * own profiles, and in a project key's list, which shows its own only).
   */
  project: z.string().optional(),
});
export type ProfileInfo = z.output<typeof ProfileInfo>;

export const ProfilePath = z.object({ profile_name: ProfileName });
