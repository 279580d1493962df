/**
 * A tiny zip writer for tests: stored or deflated entries, with a Unix mode when asked (to make
 * archives with links), and names written exactly as given (to make archives with `../`).
 */
import { deflateRawSync } from 'node:zlib';

export interface ZipInput {
  name: string;
  data?: string | Buffer;
  /** Unix mode with its type bits, e.g. `0o120777` for a symbolic link. */
  mode?: number;
  deflate?: boolean;
}

const CRC_TABLE = Array.from({ length: 256 }, (_, n) => {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  return c >>> 0;
});

function crc32(buf: Buffer): number {
  let c = 0xffffffff;
  for (const b of buf) c = CRC_TABLE[(c ^ b) & 0xff]! ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

export function makeZip(entries: ZipInput[]): Buffer {
  const locals: Buffer[] = [];
  const centrals: Buffer[] = [];
  let offset = 0;
  for (const e of entries) {
    const data = Buffer.from(e.data ?? '');
    const packed = e.deflate ? deflateRawSync(data) : data;
    const name = Buffer.from(e.name);
    const local = Buffer.alloc(30);
    local.writeUInt32LE(0x04034b50, 0);
    local.writeUInt16LE(20, 4);
    local.writeUInt16LE(e.deflate ? 8 : 0, 8);
    local.writeUInt32LE(crc32(data), 14);
    local.writeUInt32LE(packed.length, 18);
    local.writeUInt32LE(data.length, 22);
    local.writeUInt16LE(name.length, 26);
    const central = Buffer.alloc(46);
    central.writeUInt32LE(0x02014b50, 0);
    central.writeUInt16LE(e.mode !== undefined ? (3 << 8) | 20 : 20, 4);
    central.writeUInt16LE(20, 6);
    central.writeUInt16LE(e.deflate ? 8 : 0, 10);
    central.writeUInt32LE(crc32(data), 16);
    central.writeUInt32LE(packed.length, 20);
    central.writeUInt32LE(data.length, 24);
    central.writeUInt16LE(name.length, 28);
    central.writeUInt32LE(e.mode !== undefined ? (e.mode << 16) >>> 0 : 0, 38);
    central.writeUInt32LE(offset, 42);
    locals.push(local, name, packed);
    centrals.push(central, name);
    offset += local.length + name.length + packed.length;
  }
  const dir = Buffer.concat(centrals);
  const end = Buffer.alloc(22);
  end.writeUInt32LE(0x06054b50, 0);
  end.writeUInt16LE(entries.length, 8);
  end.writeUInt16LE(entries.length, 10);
  end.writeUInt32LE(dir.length, 12);
  end.writeUInt32LE(offset, 16);
  return Buffer.concat([...locals, dir, end]);
}

/**
 * A Manifest V3 extension of our own: a content script that marks the page (`data-burrow-ext` on
 * the body, and the title prefixed) and a `declarativeNetRequest` rule that sets the request
 * header `x-burrow-ext: <value>` on every request.
 */
export function testExtension(value = 'on', name = 'burrow test extension'): ZipInput[] {
  const manifest = {
    manifest_version: 3,
    name,
    version: '1.2.3',
    description: 'rewrites pages and adds a header',
    content_scripts: [{ matches: ['<all_urls>'], js: ['content.js'], run_at: 'document_end' }],
    permissions: ['declarativeNetRequest'],
    host_permissions: ['<all_urls>'],
    declarative_net_request: {
      rule_resources: [{ id: 'headers', enabled: true, path: 'rules/headers.json' }],
    },
  };
  const rules = [
    {
      id: 1,
      priority: 1,
      action: {
        type: 'modifyHeaders',
        requestHeaders: [{ header: 'x-burrow-ext', operation: 'set', value }],
      },
      condition: { urlFilter: '*', resourceTypes: ['main_frame', 'sub_frame', 'xmlhttprequest'] },
    },
  ];
  return [
    { name: 'manifest.json', data: JSON.stringify(manifest), deflate: true },
    {
      name: 'content.js',
      data: `document.body.setAttribute('data-burrow-ext', ${JSON.stringify(value)}); document.title = 'ext:' + document.title;`,
    },
    { name: 'rules/', mode: 0o040755 },
    { name: 'rules/headers.json', data: JSON.stringify(rules), deflate: true },
  ];
}
