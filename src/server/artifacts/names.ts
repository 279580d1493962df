/**
 * Names of artifacts as they leave the server: a page's file name made harmless (it is only ever
 * metadata; files are stored under their ids), the `Content-Disposition` that carries it, and the
 * media type guessed from it.
 */

/**
 * A file name from a page (`Content-Disposition`, the `download` attribute) made harmless for a
 * header and a user's disk: no directory part, no control characters, no leading dots, at most
 * 200 characters. It is only ever metadata: files are stored under their ids.
 */
export function safeFilename(name: string, fallback: string): string {
  const base = name.split(/[/\\]/).pop() ?? '';
  const clean = base
    // eslint-disable-next-line no-control-regex
    .replace(/[\u0000-\u001f\u007f-\u009f]/g, '_')
    .replace(/^[\s.]+/, '')
    .trim()
    .slice(0, 200);
  return clean === '' ? fallback : clean;
}

/** `Content-Disposition: attachment` naming `filename`, in ASCII and RFC 5987 UTF-8. */
export function contentDisposition(filename: string): string {
  const ascii = filename.replace(/[^\x20-\x7e]|["\\%]/g, '_');
  const utf8 = encodeURIComponent(filename).replace(
    /['()*]/g,
    (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`,
  );
  return `attachment; filename="${ascii}"; filename*=UTF-8''${utf8}`;
}

const MIME: Record<string, string> = {
  bin: 'application/octet-stream',
  csv: 'text/csv',
  gif: 'image/gif',
  gz: 'application/gzip',
  htm: 'text/html',
  html: 'text/html',
  jpeg: 'image/jpeg',
  jpg: 'image/jpeg',
  json: 'application/json',
  mp3: 'audio/mpeg',
  mp4: 'video/mp4',
  pdf: 'application/pdf',
  png: 'image/png',
  svg: 'image/svg+xml',
  tar: 'application/x-tar',
  txt: 'text/plain',
  webm: 'video/webm',
  webp: 'image/webp',
  xls: 'application/vnd.ms-excel',
  xlsx: 'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet',
  xml: 'application/xml',
  zip: 'application/zip',
};

/** The media type of a download, guessed from its name (CDP does not report the response's). */
export function mimeTypeOf(filename: string): string {
  const ext = /\.([A-Za-z0-9]+)$/.exec(filename)?.[1]?.toLowerCase();
  return (ext && MIME[ext]) || 'application/octet-stream';
}
