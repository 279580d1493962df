/**
 * nbformat v4 files ↔ the wire's `Notebook` / `NotebookCell` (`type`/`content` instead of
 * `cell_type`/`source`). Files are written the way Jupyter writes them (nbformat 4.5 with cell
 * ids, one-space indent, multi-line strings split into lists of lines) so Jupyter tools read
 * them; files written by others are read whichever way their strings are stored.
 */
import { randomBytes } from 'node:crypto';
import { z } from 'zod';
import type {
  KernelInfo,
  NbOutput,
  Notebook,
  NotebookCell,
  NotebookCellType,
} from '../../../api/index.js';
import { containersOver, parseBounded } from '../../../internal/json-bounded.js';

const MultilineString = z.union([z.string(), z.array(z.string())]);
const Meta = z.record(z.string(), z.unknown());

const FileCell = z.looseObject({
  id: z.string().optional(),
  cell_type: z.enum(['code', 'markdown', 'raw']),
  source: MultilineString,
  metadata: Meta.optional(),
  outputs: z.array(z.looseObject({ output_type: z.string() })).optional(),
  execution_count: z.int().nullable().optional(),
});
export type FileCell = z.output<typeof FileCell>;

const FileNotebook = z.looseObject({
  nbformat: z.literal(4),
  nbformat_minor: z.int(),
  metadata: Meta,
  cells: z.array(FileCell),
});
export type FileNotebook = z.output<typeof FileNotebook>;

/** nbformat 4.5 cell ids: 1–64 of `[A-Za-z0-9-_]`. */
const CELL_ID = /^[A-Za-z0-9_-]{1,64}$/;

export const newCellId = (taken: ReadonlySet<string>): string => {
  for (;;) {
    const id = randomBytes(4).toString('hex');
    if (!taken.has(id)) return id;
  }
};

const join = (value: string | readonly string[] | undefined): string =>
  typeof value === 'string' ? value : (value ?? []).join('');

/** Python's `str.splitlines(True)`, as nbformat's writer stores multi-line strings. */
export const splitLines = (text: string): string[] =>
  text.match(
    // Python's line boundaries include the file/group/record separators \x1c-\x1e
    // eslint-disable-next-line no-control-regex
    /[^\n\r\v\f\x1c-\x1e\x85\u2028\u2029]*(?:\r\n|[\n\r\v\f\x1c-\x1e\x85\u2028\u2029])|[^\n\r\v\f\x1c-\x1e\x85\u2028\u2029]+$/g,
  ) ?? [];

/** nbformat's `rwbase`: JSON mime types are left alone. */
const isJsonMime = (mime: string) =>
  mime === 'application/json' || (mime.startsWith('application/') && mime.endsWith('+json'));
/** nbformat's writer splits these mime types' strings into lines (and joins any on read). */
const isSplitMime = (mime: string) =>
  mime.startsWith('text/') || mime === 'application/javascript' || mime === 'image/svg+xml';

/** Apply `f` to the multi-line strings of an output: stream text and non-JSON mime data. */
function mapOutputStrings(
  output: NbOutput,
  f: (v: string | string[], mime: string) => unknown,
): NbOutput {
  const out: NbOutput = { ...output };
  if (out.output_type === 'stream' && (typeof out.text === 'string' || Array.isArray(out.text))) {
    out.text = f(out.text as string | string[], 'text/plain');
  }
  if (
    (out.output_type === 'execute_result' || out.output_type === 'display_data') &&
    out.data !== null &&
    typeof out.data === 'object'
  ) {
    const data: Record<string, unknown> = {};
    for (const [key, value] of Object.entries(out.data as Record<string, unknown>)) {
      const strings =
        typeof value === 'string' ||
        (Array.isArray(value) && value.every((v) => typeof v === 'string'));
      data[key] = strings && !isJsonMime(key) ? f(value as string | string[], key) : value;
    }
    out.data = data;
  }
  return out;
}

/** Outputs as the API returns them: multi-line strings joined (nbformat's `rejoin_lines`). */
const joinOutput = (o: NbOutput) => mapOutputStrings(o, join);
/** Outputs as Jupyter writes them (nbformat's `split_lines`). */
const splitOutput = (o: NbOutput) =>
  mapOutputStrings(o, (v, mime) => (isSplitMime(mime) ? splitLines(join(v)) : join(v)));

/**
 * What the server reads and decodes of a notebook file. The file is the instance's: anything in
 * it can write one, and every notebook operation decodes it, changes it and encodes it again.
 * That happens in the notebook thread (notebook-thread.ts), not the main thread; these bounds
 * keep what one operation holds there, and how long it takes, to a few hundred MiB and
 * milliseconds at most (an outside tester's 54.6 MiB notebook of 200,000 cells took 540 MiB and
 * 1.1–2.9 s). A notebook of tens of cells with images (a few MiB, a few hundred objects) is far
 * under both. The server writes no notebook past them either (`notebook_too_large`, not written).
 */
export const MAX_NOTEBOOK_BYTES = 8 * 1024 * 1024;
/** Objects and arrays a notebook may hold (as Jupyter writes it, a cell is 4, an output 2–5). */
export const MAX_NOTEBOOK_CONTAINERS = 50_000;
/** How deep they may nest (nbformat's own values nest a few levels). */
const MAX_NOTEBOOK_DEPTH = 256;

/** A notebook file past `MAX_NOTEBOOK_BYTES` or `MAX_NOTEBOOK_CONTAINERS`; nothing was decoded. */
export class NotebookTooLarge extends Error {
  override name = 'NotebookTooLarge';
}

/** Why a notebook file's text is past the bounds, or undefined. */
export function notebookOverBounds(text: string, bytes: number): string | undefined {
  if (bytes > MAX_NOTEBOOK_BYTES) return `over ${MAX_NOTEBOOK_BYTES} bytes (${bytes})`;
  if (containersOver(text, MAX_NOTEBOOK_CONTAINERS)) {
    return `more than ${MAX_NOTEBOOK_CONTAINERS} objects and arrays (cells, outputs, metadata)`;
  }
  return undefined;
}

export function parseNotebook(text: string): FileNotebook {
  let json: unknown;
  const over = notebookOverBounds(text, 0);
  if (over) throw new NotebookTooLarge(over);
  try {
    // the file is the instance's: what it costs to decode and walk is bounded
    json = parseBounded(text, MAX_NOTEBOOK_CONTAINERS, MAX_NOTEBOOK_DEPTH);
  } catch (err) {
    throw new Error(`not JSON: ${(err as Error).message}`);
  }
  const parsed = FileNotebook.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new Error(
      `not an nbformat v4 notebook (${issue ? `${issue.path.join('.')}: ${issue.message}` : 'invalid'})`,
    );
  }
  return parsed.data;
}

/**
 * Give every cell a valid, unique id (nbformat 4.5). Returns whether anything changed, so the
 * caller can write the upgraded file back and keep the ids stable.
 */
export function ensureCellIds(nb: FileNotebook): boolean {
  const taken = new Set<string>();
  let changed = false;
  for (const cell of nb.cells) {
    if (cell.id === undefined || !CELL_ID.test(cell.id) || taken.has(cell.id)) {
      cell.id = newCellId(taken);
      changed = true;
    }
    taken.add(cell.id);
  }
  if (nb.nbformat_minor < 5) {
    nb.nbformat_minor = 5;
    changed = true;
  }
  return changed;
}

export function serializeNotebook(nb: FileNotebook): string {
  const cells = nb.cells.map((cell) => {
    const out: Record<string, unknown> = {
      ...cell,
      id: cell.id,
      cell_type: cell.cell_type,
      metadata: cell.metadata ?? {},
      source: splitLines(join(cell.source)),
    };
    if (cell.cell_type === 'code') {
      out.execution_count = cell.execution_count ?? null;
      out.outputs = (cell.outputs ?? []).map(splitOutput);
    } else {
      // markdown and raw cells allow no outputs or execution_count in the schema
      delete out.outputs;
      delete out.execution_count;
    }
    return out;
  });
  return `${JSON.stringify(sortKeys({ ...nb, cells }), null, 1)}\n`;
}

/** Keys sorted at every level, as nbformat's writer (`sort_keys=True`) leaves them. */
function sortKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (value === null || typeof value !== 'object') return value;
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(value).sort())
    out[key] = sortKeys((value as Record<string, unknown>)[key]);
  return out;
}

export function newNotebook(name: string, spec: KernelInfo): FileNotebook {
  return {
    nbformat: 4,
    nbformat_minor: 5,
    metadata: {
      kernelspec: { name: spec.name, display_name: spec.display_name, language: spec.language },
      language_info: { name: spec.language },
      title: name,
    },
    cells: [],
  };
}

export function newCell(
  type: NotebookCellType,
  content: string,
  metadata: Record<string, unknown> | undefined,
  taken: ReadonlySet<string>,
): FileCell {
  const cell: FileCell = {
    id: newCellId(taken),
    cell_type: type,
    source: content,
    metadata: metadata ?? {},
  };
  if (type === 'code') {
    cell.outputs = [];
    cell.execution_count = null;
  }
  return cell;
}

export const kernelNameOf = (nb: FileNotebook): string => {
  const spec = nb.metadata.kernelspec as { name?: unknown } | undefined;
  return typeof spec?.name === 'string' && spec.name !== '' ? spec.name : 'python3';
};

export function toWireCell(cell: FileCell): NotebookCell {
  const wire: NotebookCell = {
    id: cell.id ?? '',
    type: cell.cell_type,
    content: join(cell.source),
    metadata: cell.metadata ?? {},
  };
  if (cell.cell_type === 'code') {
    wire.outputs = (cell.outputs ?? []).map((o) => joinOutput(o as NbOutput));
    wire.execution_count = cell.execution_count ?? null;
  }
  return wire;
}

export function toWireNotebook(id: string, nb: FileNotebook): Notebook {
  const title = nb.metadata.title;
  return {
    id,
    name: typeof title === 'string' ? title : id,
    kernel_name: kernelNameOf(nb),
    cells: nb.cells.map(toWireCell),
    metadata: nb.metadata,
  };
}
