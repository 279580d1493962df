/**
 * The module graph of src/ and adapters/, read with the TypeScript parser (not patterns), and the
 * import rules of docs/architecture.md ("Import rules") checked against it. Every way a module can
 * name another counts: `import` and `export … from` (type-only ones too, marked so), `import x =
 * require()`, dynamic `import()`, and `import('…')` types. The package's own name resolves through
 * package.json `exports` to the source file it is built from.
 *
 * The rules themselves are data, in ./floors.ts. scripts/check-deps.ts runs them on the real tree
 * (`npm run lint`); ./dependencies.test.ts runs them on the real tree and on small made-up graphs
 * (to show each rule does refuse what it should).
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { builtinModules } from 'node:module';
import { dirname, join, posix, relative } from 'node:path';
import ts from 'typescript';
import {
  KNOWN_CYCLES,
  KNOWN_VIOLATIONS,
  PART_RULES,
  SERVER_FLOORS,
  SERVER_ROOMS,
  type PartRule,
} from './floors.js';

export interface Edge {
  /** Repository-relative path of the importing module. */
  from: string;
  /** Repository-relative path of the imported module, `pkg:<name>` or `node:<name>`. */
  to: string;
  /** The specifier as written. */
  spec: string;
  line: number;
  /** Erased at run time: `import type`, `export type`, or an `import('…')` type. */
  typeOnly: boolean;
  /** A dynamic `import()` expression. */
  dynamic: boolean;
}

export interface Graph {
  /** Every module, repository-relative. */
  files: string[];
  edges: Edge[];
}

const SOURCE = /\.(ts|mts|mjs)$/;
const DECLARATION = /\.d\.ts$/;
const PAGE_SCRIPT = /\.page\.mjs$/;

function walk(root: string, dir: string): string[] {
  const abs = join(root, dir);
  if (!existsSync(abs)) return [];
  return readdirSync(abs).flatMap((name) => {
    const path = join(abs, name);
    if (statSync(path).isDirectory()) return walk(root, relative(root, path));
    // a page's script (`*.page.mjs`) runs in the viewer's browser: its imports are URLs
    const module = SOURCE.test(name) && !DECLARATION.test(name) && !PAGE_SCRIPT.test(name);
    return module ? [relative(root, path)] : [];
  });
}

/** `./dist/src/index.js` → `src/index.ts`: the source a built entry point comes from. */
function sourceOf(built: string): string {
  return built
    .replace(/^\.\//, '')
    .replace(/^dist\//, '')
    .replace(/\.js$/, '.ts');
}

/** The package's name and its entry points (`name`, `name/sub`) mapped to source files. */
export function packageEntries(root: string): { name: string; entries: Map<string, string> } {
  const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
    name: string;
    exports: Record<string, string | { default?: string; import?: string }>;
  };
  const entries = new Map<string, string>();
  for (const [key, target] of Object.entries(pkg.exports)) {
    const file = typeof target === 'string' ? target : (target.import ?? target.default);
    if (!file?.endsWith('.js')) continue; // ./package.json
    entries.set(key === '.' ? pkg.name : `${pkg.name}/${key.replace(/^\.\//, '')}`, sourceOf(file));
  }
  return { name: pkg.name, entries };
}

/** What a specifier written in `from` names, or undefined when it names nothing that exists. */
function resolveSpec(
  root: string,
  from: string,
  spec: string,
  entries: Map<string, string>,
): string | undefined {
  if (spec.startsWith('.')) {
    const base = posix.join(posix.dirname(from), spec);
    const candidates = [
      base.replace(/\.js$/, '.ts'),
      base.replace(/\.mjs$/, '.mts'),
      base,
      `${base}.ts`,
      posix.join(base, 'index.ts'),
    ];
    return candidates.find((c) => SOURCE.test(c) && existsSync(join(root, c)));
  }
  const entry = entries.get(spec);
  if (entry) return entry;
  if (spec.startsWith('node:')) return spec;
  if (builtinModules.includes(spec)) return `node:${spec}`;
  const parts = spec.split('/');
  return `pkg:${spec.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0]}`;
}

/** The imports of one module's text. */
export function importsOf(file: string, text: string): Omit<Edge, 'to' | 'from'>[] {
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const out: Omit<Edge, 'to' | 'from'>[] = [];
  const add = (
    node: ts.Node,
    spec: ts.Expression | undefined,
    typeOnly: boolean,
    dynamic: boolean,
  ) => {
    if (!spec || !ts.isStringLiteralLike(spec)) return;
    const line = source.getLineAndCharacterOfPosition(node.getStart()).line + 1;
    out.push({ spec: spec.text, line, typeOnly, dynamic });
  };
  const visit = (node: ts.Node): void => {
    if (ts.isImportDeclaration(node)) {
      const clause = node.importClause;
      // `import { type A, type B } from` is erased too; `import {} from` / a bare import is not
      const named = clause?.namedBindings;
      const allTypes =
        !!clause &&
        !clause.name &&
        !!named &&
        ts.isNamedImports(named) &&
        named.elements.length > 0 &&
        named.elements.every((e) => e.isTypeOnly);
      add(node, node.moduleSpecifier, !!clause?.isTypeOnly || allTypes, false);
    } else if (ts.isExportDeclaration(node)) {
      const clause = node.exportClause;
      const allTypes =
        !!clause &&
        ts.isNamedExports(clause) &&
        clause.elements.length > 0 &&
        clause.elements.every((e) => e.isTypeOnly);
      add(node, node.moduleSpecifier, node.isTypeOnly || allTypes, false);
    } else if (
      ts.isImportEqualsDeclaration(node) &&
      ts.isExternalModuleReference(node.moduleReference)
    ) {
      add(node, node.moduleReference.expression, node.isTypeOnly, false);
    } else if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword) {
      add(node, node.arguments[0], false, true);
    } else if (ts.isImportTypeNode(node)) {
      const arg = node.argument;
      if (ts.isLiteralTypeNode(arg)) add(node, arg.literal as ts.Expression, true, false);
    } else if (
      ts.isCallExpression(node) &&
      ts.isIdentifier(node.expression) &&
      node.expression.text === 'require'
    ) {
      add(node, node.arguments[0], false, false);
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return out;
}

/** The graph of every module under `dirs` (repository-relative) of the checkout at `root`. */
export function buildGraph(root: string, dirs: readonly string[]): Graph {
  const { entries } = packageEntries(root);
  const files = dirs.flatMap((d) => walk(root, d)).sort();
  const edges: Edge[] = [];
  for (const from of files) {
    for (const imp of importsOf(from, readFileSync(join(root, from), 'utf8'))) {
      const to = resolveSpec(root, from, imp.spec, entries);
      edges.push({ ...imp, from, to: to ?? `missing:${imp.spec}` });
    }
  }
  return { files, edges };
}

// ---------------------------------------------------------------------------------------------
// The rules

/**
 * A module's layer: `api`, `client`, `session`, `adapters`, …; inside src/server/ its room:
 * `server` for the entry point (src/server/index.ts), `server/base` for the other modules at the
 * top of the folder (errors, meta), `server/<folder>` for the rest.
 */
export function layerOf(file: string): string {
  const parts = file.split('/');
  if (parts[0] === 'adapters') return 'adapters';
  if (parts[0] !== 'src') return parts[0]!;
  if (parts.length === 2) return 'src'; // src/index.ts
  if (parts[1] === 'server' && parts.length === 3) {
    return parts[2] === 'index.ts' ? 'server' : 'server/base';
  }
  if (parts[1] === 'server') return `server/${parts[2]}`;
  return parts[1]!;
}

const isServer = (layer: string) => layer === 'server' || layer.startsWith('server/');

/** The part a layer's own rule is written for: every room of src/server/ is `server`. */
const partOf = (layer: string) => (isServer(layer) ? 'server' : layer);

export interface Violation {
  rule: string;
  edge: Edge;
}

export interface RuleOptions {
  /** The package name (its own specifiers are resolved before the rules run). */
  packageName: string;
  /** The modules that are the package's public entry points. */
  entryModules: ReadonlySet<string>;
}

/** The words of `rule` for an import of part `to` by a package named `pkg`. */
const says = (rule: PartRule, to: string, pkg: string) =>
  rule.says.replaceAll('{to}', to).replaceAll('{package}', pkg);

/** Whether `edge`, from a module of the part `rule` is written for, breaks that rule. */
function breaksPartRule(rule: PartRule, edge: Edge, opts: RuleOptions): boolean {
  const from = partOf(layerOf(edge.from));
  if (edge.to.includes(':')) return !!rule.onlyOutside && !rule.onlyOutside.includes(edge.to);
  const to = partOf(layerOf(edge.to));
  if (rule.onlyParts && to !== from && !rule.onlyParts.includes(to)) return true;
  if (rule.neverParts?.includes(to)) {
    // the embedded default: session/ loads the server's entry point lazily, with import()
    const lazy = !!rule.lazyServerEntry && edge.dynamic && opts.entryModules.has(edge.to);
    if (!lazy) return true;
  }
  if (rule.throughEntryPoints) {
    const sameAdapter = to === from && edge.to.split('/')[1] === edge.from.split('/')[1];
    const publicEntry = opts.entryModules.has(edge.to) && edge.spec.startsWith(opts.packageName);
    const besides = rule.throughEntryPoints.besides.includes(edge.to);
    if (!sameAdapter && !publicEntry && !besides) return true;
  }
  return false;
}

/** Every edge of `graph` that breaks a rule of test/repo/floors.ts, with the rule's words. */
export function checkRules(graph: Graph, opts: RuleOptions): Violation[] {
  const out: Violation[] = [];
  const refuse = (rule: string, edge: Edge) => out.push({ rule, edge });
  for (const edge of graph.edges) {
    const from = layerOf(edge.from);
    const local = !edge.to.includes(':');
    const to = local ? layerOf(edge.to) : edge.to;
    if (edge.to.startsWith('missing:')) {
      refuse('an import names a module that does not exist', edge);
      continue;
    }
    const own = PART_RULES[partOf(from)];
    if (own && breaksPartRule(own, edge, opts)) {
      refuse(says(own, partOf(to), opts.packageName), edge);
    }
    if (isServer(from) && local && isServer(to) && to !== from) {
      const row = SERVER_ROOMS[from];
      if (!row) refuse(`${from}/ is no room of the floor plan (add its row)`, edge);
      else if (!row.includes(to)) {
        const floor = (room: string) => SERVER_FLOORS.findIndex((f) => f.includes(room));
        const where =
          floor(to) < 0 ? 'no room' : floor(to) === floor(from) ? 'beside it' : 'above it';
        refuse(`${from} imports only the floors below it; ${to} is ${where}`, edge);
      }
    }
  }
  return out;
}

/** The folders of src/server/ under `root` that have no floor: each room must have its row. */
export function roomsWithoutFloor(root: string): string[] {
  const dir = join(root, 'src', 'server');
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .filter((name) => statSync(join(dir, name)).isDirectory())
    .map((name) => `server/${name}`)
    .filter((room) => !SERVER_ROOMS[room])
    .sort();
}

/** Every cycle of the graph's internal edges (all of them: static, dynamic and type-only). */
export function cycles(graph: Graph): string[][] {
  const next = new Map<string, Set<string>>();
  for (const e of graph.edges) {
    if (e.to.includes(':')) continue;
    let set = next.get(e.from);
    if (!set) next.set(e.from, (set = new Set()));
    set.add(e.to);
  }
  // Tarjan's strongly connected components; each one of two or more modules (or a module that
  // imports itself) holds at least one cycle
  let index = 0;
  const idx = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const out: string[][] = [];
  const strong = (v: string) => {
    idx.set(v, index);
    low.set(v, index++);
    stack.push(v);
    onStack.add(v);
    for (const w of next.get(v) ?? []) {
      if (!idx.has(w)) {
        strong(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) {
        low.set(v, Math.min(low.get(v)!, idx.get(w)!));
      }
    }
    if (low.get(v) === idx.get(v)) {
      const scc: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        scc.push(w);
      } while (w !== v);
      if (scc.length > 1 || next.get(v)?.has(v)) out.push(shortestCycle(scc, next));
    }
  };
  for (const v of [...next.keys()].sort()) if (!idx.has(v)) strong(v);
  return out;
}

/** One shortest cycle through the component's first module (in sorted order), to show. */
function shortestCycle(scc: string[], next: Map<string, Set<string>>): string[] {
  const members = new Set(scc);
  const start = [...scc].sort()[0]!;
  const prev = new Map<string, string>();
  const queue = [start];
  while (queue.length > 0) {
    const v = queue.shift()!;
    for (const w of next.get(v) ?? []) {
      if (!members.has(w)) continue;
      if (w === start) {
        const path = [v];
        while (path[0] !== start) path.unshift(prev.get(path[0]!)!);
        return [...path, start];
      }
      if (!prev.has(w)) {
        prev.set(w, v);
        queue.push(w);
      }
    }
  }
  return [start, start];
}

/** A violation as one line a person can act on. */
export function describe(v: Violation): string {
  const { edge } = v;
  const kind = [edge.typeOnly && 'type-only', edge.dynamic && 'dynamic'].filter(Boolean).join(' ');
  return `${edge.from}:${edge.line} imports '${edge.spec}'${kind ? ` (${kind})` : ''} → ${edge.to}: ${v.rule}`;
}

export const repoRoot = (from: string) => {
  let dir = from;
  while (!existsSync(join(dir, 'package.json'))) dir = dirname(dir);
  return dir;
};

/** The rule options of the checkout at `root`: its package name and entry points. */
export function optionsFor(root: string): RuleOptions {
  const { name, entries } = packageEntries(root);
  return { packageName: name, entryModules: new Set(entries.values()) };
}

/**
 * Everything the floor plan refuses in the checkout at `root`, one line each, the known
 * exceptions of ./floors.ts left out: the imports that break a rule, the cycles, and the folders
 * of src/server/ without a floor. What `npm run lint` prints (scripts/check-deps.ts).
 */
export function floorPlanProblems(root: string): string[] {
  const graph = buildGraph(root, ['src', 'adapters']);
  const known = (v: Violation) =>
    KNOWN_VIOLATIONS.some((k) => k.from === v.edge.from && k.to === v.edge.to);
  return [
    ...checkRules(graph, optionsFor(root))
      .filter((v) => !known(v))
      .map(describe),
    ...cycles(graph)
      .map((c) => c.join(' -> '))
      .filter((c) => !KNOWN_CYCLES.some((k) => k.cycle === c))
      .map((c) => `an import cycle: ${c}`),
    ...roomsWithoutFloor(root).map(
      (room) => `src/${room}/ has no floor: add its row to SERVER_FLOORS (test/repo/floors.ts)`,
    ),
  ];
}
