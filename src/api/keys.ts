/**
 * burrow extension (not in docs/spec/API.md): API keys of projects, in cluster mode. A project's
 * key sees and controls only that project's instances and auth states; the server's own key
 * (the admin key) manages them. The key itself is in the answer of `create` only: the server
 * keeps a digest.
 */
import { z } from 'zod';

/** A project's name: letters, digits, `.`, `_`, `-`, starting with a letter or digit. */
export const ProjectName = z
  .string()
  .regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/, 'a project is 1-63 letters, digits, ., _ or -');

export const KeyCreateRequest = z.object({
  project: ProjectName,
  /** What the key is for, shown by `list`. */
  name: z.string().min(1).max(200).optional(),
});
export type KeyCreateRequest = z.input<typeof KeyCreateRequest>;

/** A key as listed: never the key or its digest. */
export const KeyInfo = z.looseObject({
  /** `key_` and 16 hex digits. */
  id: z.string(),
  project: z.string(),
  name: z.string().nullable(),
  /** ISO 8601 */
  created_at: z.string(),
  /** The key's last four characters, to tell keys apart. */
  last4: z.string(),
  /** ISO 8601, or null for a key in use. */
  revoked_at: z.string().nullable(),
});
export type KeyInfo = z.output<typeof KeyInfo>;

/** What `create` answers: the key, this once. */
export const KeyCreated = KeyInfo.extend({ key: z.string() });
export type KeyCreated = z.output<typeof KeyCreated>;

export const KeyPath = z.object({ key_id: z.string().min(1).max(64) });

export const RevokeKeyResult = z.looseObject({ status: z.literal('success') });
