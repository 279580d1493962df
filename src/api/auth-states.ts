/**
 * burrow extensions for saved auth states (not in docs/spec/API.md): export to and import from
 * Playwright's `storageState` format, and delete. The `StorageState` schema follows what
 * playwright-core 1.51+ reads in `browser.newContext({ storageState })` and writes with
 * `context.storageState({ indexedDB: true })`: cookies as Playwright lists them, and per origin its
 * localStorage and IndexedDB databases (records whose value is plain JSON carry it as `value`, the
 * others as `valueEncoded`, Playwright's tagged encoding of dates, typed arrays, maps and the
 * like). burrow adds `sessionStorage` per origin, which Playwright ignores.
 */
import { z } from 'zod';

const NameValue = z.looseObject({ name: z.string(), value: z.string() });

export const StorageStateCookie = z
  .looseObject({
    name: z.string(),
    value: z.string(),
    /** Either `url`, or `domain` and `path`. */
    url: z.string().optional(),
    domain: z.string().optional(),
    path: z.string().optional(),
    /** Unix time in seconds; -1 for a session cookie. */
    expires: z.number().optional(),
    httpOnly: z.boolean().optional(),
    secure: z.boolean().optional(),
    sameSite: z.enum(['Strict', 'Lax', 'None']).optional(),
    /** The top-level site of a partitioned (CHIPS) cookie. */
    partitionKey: z.string().optional(),
    _crHasCrossSiteAncestor: z.boolean().optional(),
  })
  .refine((c) => c.url !== undefined || c.domain !== undefined, {
    message: 'A cookie needs a url, or a domain and a path',
  });
export type StorageStateCookie = z.output<typeof StorageStateCookie>;

/** One IndexedDB record: `key` only for stores without a key path; `*Encoded` for non-JSON data. */
export const IndexedDBRecord = z.looseObject({
  key: z.unknown().optional(),
  keyEncoded: z.unknown().optional(),
  value: z.unknown().optional(),
  valueEncoded: z.unknown().optional(),
});

export const IndexedDBIndex = z.looseObject({
  name: z.string(),
  keyPath: z.string().optional(),
  keyPathArray: z.array(z.string()).optional(),
  multiEntry: z.boolean(),
  unique: z.boolean(),
});

export const IndexedDBStore = z.looseObject({
  name: z.string(),
  autoIncrement: z.boolean(),
  keyPath: z.string().optional(),
  keyPathArray: z.array(z.string()).optional(),
  records: z.array(IndexedDBRecord),
  indexes: z.array(IndexedDBIndex),
});

export const IndexedDBDatabase = z.looseObject({
  name: z.string().min(1),
  version: z.int().min(1),
  stores: z.array(IndexedDBStore),
});
export type IndexedDBDatabase = z.output<typeof IndexedDBDatabase>;

export const StorageStateOrigin = z.looseObject({
  /** `scheme://host[:port]`, as `location.origin` gives it. */
  origin: z.string().min(1),
  localStorage: z.array(NameValue),
  indexedDB: z.array(IndexedDBDatabase).optional(),
  /** burrow's addition (Playwright ignores it): the origin's sessionStorage. */
  sessionStorage: z.array(NameValue).optional(),
});

/** Playwright's `storageState` JSON. */
export const StorageState = z.looseObject({
  cookies: z.array(StorageStateCookie),
  origins: z.array(StorageStateOrigin),
});
export type StorageState = z.output<typeof StorageState>;
/** What `import` accepts (the same shape, as sent). */
export type StorageStateInput = z.input<typeof StorageState>;

export const AuthStatePath = z.object({ auth_state_id: z.string().min(1) });

export const ImportAuthStateQuery = z.object({
  /**
   * The state's name. When exactly one saved state has it, the import replaces that state's data
   * (its id stays); when none does, a new state is made; when several do, 409. Without a name the
   * import is a new state named "default".
   */
  name: z.string().min(1).optional(),
});
export type ImportAuthStateQuery = z.input<typeof ImportAuthStateQuery>;

export const ImportAuthStateResult = z.looseObject({
  auth_state_id: z.string(),
  name: z.string(),
});
export type ImportAuthStateResult = z.output<typeof ImportAuthStateResult>;

export const DeleteAuthStateResult = z.looseObject({ status: z.string() });
export type DeleteAuthStateResult = z.output<typeof DeleteAuthStateResult>;
