/**
 * IndexedDB capture and restore for auth states, as scripts evaluated in the hidden scratch page
 * of src/server/chromium/auth.ts (an empty document of the origin, so no site script runs beside
 * them). Databases travel in Playwright's `storageState` form (src/api/auth-states.ts): stores
 * with their key path, auto-increment flag and indexes, and records whose value is plain JSON
 * as `value`, anything else (dates, typed arrays, maps, sets, big integers, `undefined` inside an
 * object, shared references …) as `valueEncoded`, a tagged tree:
 *
 * - `{v: 'undefined' | 'null' | 'NaN' | 'Infinity' | '-Infinity' | '-0'}`, strings, finite
 *   numbers and booleans as themselves, `{bi}` big integers, `{d}` dates (ISO), `{u}` URLs,
 *   `{r: {p, f}}` regular expressions, `{e: {n, m, s}}` errors,
 *   `{ta: {b, k}}` typed arrays (base64 of their bytes, `k` the element kind), `{ab: {b}}`
 *   array buffers;
 * - `{a: [...], id}` arrays, `{o: [{k, v}], id}` objects, `{m: [{k, v}], id}` maps, `{s: [...],
 *   id}` sets, and `{ref: id}` for an object met before (ids count from 1 in visiting order).
 *
 * Keys of stores without a key path travel the same way as `key` / `keyEncoded`.
 */

/** Shared helpers of both scripts (plain JavaScript, evaluated in the page). */
const HELPERS = String.raw`
const KINDS = {
  i8: Int8Array, ui8: Uint8Array, ui8c: Uint8ClampedArray, i16: Int16Array, ui16: Uint16Array,
  i32: Int32Array, ui32: Uint32Array, f32: Float32Array, f64: Float64Array,
  bi64: BigInt64Array, bui64: BigUint64Array,
};
const done = (request) => new Promise((resolve, reject) => {
  request.onsuccess = () => resolve(request.result);
  request.onerror = () => reject(request.error);
});
const toBase64 = (bytes) => {
  let bin = '';
  for (let i = 0; i < bytes.length; i += 0x8000) {
    bin += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000));
  }
  return btoa(bin);
};
const fromBase64 = (b64) => {
  const bin = atob(b64);
  const bytes = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
  return bytes;
};
`;

/** Evaluates to `[{origin-less database}]`: every database of the page's origin. */
export const COLLECT_INDEXEDDB = String.raw`(async () => {
${HELPERS}
const isPlain = (v) => {
  if (v === null || typeof v === 'string' || typeof v === 'boolean') return true;
  if (typeof v === 'number') return Number.isFinite(v) && !Object.is(v, -0);
  if (Array.isArray(v)) return v.every(isPlain);
  if (typeof v === 'object' && Object.getPrototypeOf(v) === Object.prototype) {
    return Object.values(v).every(isPlain);
  }
  return false;
};
const encode = (value, seen = new Map()) => {
  if (value === undefined || typeof value === 'symbol' || typeof value === 'function') return { v: 'undefined' };
  if (value === null) return { v: 'null' };
  if (typeof value === 'number') {
    if (Number.isNaN(value)) return { v: 'NaN' };
    if (value === Infinity) return { v: 'Infinity' };
    if (value === -Infinity) return { v: '-Infinity' };
    if (Object.is(value, -0)) return { v: '-0' };
    return value;
  }
  if (typeof value === 'string' || typeof value === 'boolean') return value;
  if (typeof value === 'bigint') return { bi: value.toString() };
  if (value instanceof Date) return { d: value.toJSON() };
  if (value instanceof RegExp) return { r: { p: value.source, f: value.flags } };
  if (value instanceof Error) return { e: { n: value.name, m: value.message, s: String(value.stack ?? '') } };
  for (const [k, Kind] of Object.entries(KINDS)) {
    if (value instanceof Kind) {
      return { ta: { b: toBase64(new Uint8Array(value.buffer, value.byteOffset, value.byteLength)), k } };
    }
  }
  if (value instanceof ArrayBuffer) return { ab: { b: toBase64(new Uint8Array(value)) } };
  if (seen.has(value)) return { ref: seen.get(value) };
  const id = seen.size + 1;
  seen.set(value, id);
  if (value instanceof Map) return { m: [...value].map(([k, v]) => ({ k: encode(k, seen), v: encode(v, seen) })), id };
  if (value instanceof Set) return { s: [...value].map((v) => encode(v, seen)), id };
  if (Array.isArray(value)) return { a: value.map((v) => encode(v, seen)), id };
  return { o: Object.keys(value).map((k) => ({ k, v: encode(value[k], seen) })), id };
};
const field = (record, name, value) => {
  if (isPlain(value)) record[name] = value;
  else record[name + 'Encoded'] = encode(value);
};
const keyPathOf = (p) => (typeof p === 'string' ? { keyPath: p } : Array.isArray(p) ? { keyPathArray: [...p] } : {});
const out = [];
for (const info of await indexedDB.databases()) {
  if (!info.name || !info.version) continue;
  const request = indexedDB.open(info.name);
  // deleted since it was listed: opening would make an empty one, so abort that
  request.onupgradeneeded = () => request.transaction.abort();
  let db;
  try { db = await done(request); } catch { continue; }
  try {
    const stores = [];
    const names = [...db.objectStoreNames];
    const tx = names.length > 0 ? db.transaction(names, 'readonly') : undefined;
    for (const name of names) {
      const store = tx.objectStore(name);
      const [keys, values] = await Promise.all([done(store.getAllKeys()), done(store.getAll())]);
      const records = keys.map((key, i) => {
        const record = {};
        if (store.keyPath === null) field(record, 'key', key);
        field(record, 'value', values[i]);
        return record;
      });
      const indexes = [...store.indexNames].map((n) => {
        const index = store.index(n);
        return { name: index.name, ...keyPathOf(index.keyPath), multiEntry: index.multiEntry, unique: index.unique };
      });
      stores.push({ name, autoIncrement: store.autoIncrement, ...keyPathOf(store.keyPath), records, indexes });
    }
    out.push({ name: db.name, version: db.version, stores });
  } finally {
    db.close();
  }
}
return out;
})()`;

/**
 * An expression that restores `databases` in the page's origin and evaluates to nothing. A
 * database of the same name and version whose stores match is cleared and refilled in one
 * transaction; any other of that name is deleted and made again (if a tab keeps it open and does
 * not let go within `blockedMs`, the expression throws, naming it). Databases the state does not
 * name are left alone.
 */
export function restoreIndexedDB(databases: unknown[], blockedMs = 5_000): string {
  return String.raw`(async () => {
${HELPERS}
const decode = (value, refs = new Map()) => {
  if (value === null || typeof value !== 'object') return value;
  if ('ref' in value) return refs.get(value.ref);
  if ('v' in value) {
    return { undefined: undefined, null: null, NaN: NaN, Infinity: Infinity, '-Infinity': -Infinity, '-0': -0 }[value.v];
  }
  if ('d' in value) return new Date(value.d);
  if ('u' in value) return new URL(value.u);
  if ('bi' in value) return BigInt(value.bi);
  if ('r' in value) return new RegExp(value.r.p, value.r.f);
  if ('e' in value) {
    const error = new Error(value.e.m);
    error.name = value.e.n;
    error.stack = value.e.s;
    return error;
  }
  if ('ta' in value) {
    const bytes = fromBase64(value.ta.b);
    return new KINDS[value.ta.k](bytes.buffer);
  }
  if ('ab' in value) return fromBase64(value.ab.b).buffer;
  if ('a' in value) {
    const out = [];
    refs.set(value.id, out);
    for (const item of value.a) out.push(decode(item, refs));
    return out;
  }
  if ('m' in value) {
    const out = new Map();
    refs.set(value.id, out);
    for (const { k, v } of value.m) out.set(decode(k, refs), decode(v, refs));
    return out;
  }
  if ('s' in value) {
    const out = new Set();
    refs.set(value.id, out);
    for (const item of value.s) out.add(decode(item, refs));
    return out;
  }
  if ('o' in value) {
    const out = {};
    refs.set(value.id, out);
    for (const { k, v } of value.o) if (k !== '__proto__') out[k] = decode(v, refs);
    return out;
  }
  return value;
};
const keyPathOf = (s) => s.keyPathArray ?? s.keyPath ?? null;
const sameKeyPath = (a, b) => JSON.stringify(a) === JSON.stringify(b);
const fill = async (db, stores) => {
  const names = stores.map((s) => s.name);
  if (names.length === 0) return;
  const tx = db.transaction(names, 'readwrite');
  const finished = new Promise((resolve, reject) => {
    tx.oncomplete = resolve;
    tx.onerror = () => reject(tx.error);
    tx.onabort = () => reject(tx.error ?? new Error('transaction aborted'));
  });
  for (const s of stores) {
    const store = tx.objectStore(s.name);
    store.clear();
    for (const r of s.records) {
      const value = 'valueEncoded' in r ? decode(r.valueEncoded) : r.value;
      if ('keyEncoded' in r) store.put(value, decode(r.keyEncoded));
      else if ('key' in r && store.keyPath === null) store.put(value, r.key);
      else store.put(value);
    }
  }
  await finished;
};
const matches = (db, want) => {
  const have = [...db.objectStoreNames];
  if (have.length !== want.stores.length) return false;
  if (want.stores.some((s) => !db.objectStoreNames.contains(s.name))) return false;
  if (have.length === 0) return true;
  const tx = db.transaction(have, 'readonly');
  return want.stores.every((s) => {
    const store = tx.objectStore(s.name);
    return store.autoIncrement === s.autoIncrement && sameKeyPath(store.keyPath, keyPathOf(s));
  });
};
const remove = (name) => new Promise((resolve, reject) => {
  const request = indexedDB.deleteDatabase(name);
  let timer;
  request.onsuccess = () => { clearTimeout(timer); resolve(); };
  request.onerror = () => { clearTimeout(timer); reject(request.error); };
  request.onblocked = () => {
    timer = setTimeout(() => reject(new Error(
      'IndexedDB database "' + name + '" of ' + location.origin +
      ' is held open by a tab at another version; close or reload that tab and retry')), ${blockedMs});
  };
});
const wanted = ${JSON.stringify(databases)};
const existing = new Map((await indexedDB.databases()).map((d) => [d.name, d.version]));
for (const want of wanted) {
  if (existing.get(want.name) === want.version) {
    const db = await done(indexedDB.open(want.name, want.version));
    try {
      if (matches(db, want)) { await fill(db, want.stores); continue; }
    } finally {
      db.close();
    }
  }
  if (existing.has(want.name)) await remove(want.name);
  const request = indexedDB.open(want.name, want.version);
  request.onupgradeneeded = () => {
    const db = request.result;
    for (const s of want.stores) {
      const store = db.createObjectStore(s.name, { autoIncrement: s.autoIncrement, keyPath: keyPathOf(s) });
      for (const index of s.indexes) {
        store.createIndex(index.name, index.keyPathArray ?? index.keyPath, { unique: index.unique, multiEntry: index.multiEntry });
      }
    }
  };
  const db = await done(request);
  try {
    await fill(db, want.stores);
  } finally {
    db.close();
  }
}
})()`;
}
