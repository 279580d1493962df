/**
 * The accessibility snapshot `browser_snapshot` returns: the page's accessibility tree, from
 * CDP `Accessibility.getFullAXTree`, as compact indented text in the shape agents written for
 * Playwright's MCP server read (`- role "name" [ref=e3]`), each element carrying a reference
 * that the click/type/hover/select tools resolve back to its DOM node.
 *
 * Why CDP and not playwright-core: the server does not depend on playwright-core (it is an
 * optional peer of the bridge), and the tree Chromium computes is the one screen readers see;
 * a reference is the node's `backendDOMNodeId`, which `DOM.getContentQuads` and
 * `DOM.resolveNode` accept directly. Only the main frame is walked (iframes show as `iframe`).
 */

/** A node of `Accessibility.getFullAXTree`, the fields read here. */
export interface AXNode {
  nodeId: string;
  ignored?: boolean;
  role?: { value?: unknown };
  name?: { value?: unknown };
  value?: { value?: unknown };
  properties?: { name: string; value?: { value?: unknown } }[];
  childIds?: string[];
  parentId?: string;
  backendDOMNodeId?: number;
}

/** Roles that only group; shown only when they have a name, else their children move up. */
const TRANSPARENT = new Set([
  'none',
  'generic',
  'presentation',
  'LineBreak',
  'InlineTextBox',
  'RootWebArea',
  'WebArea',
  'Section',
  'LayoutTable',
  'LayoutTableRow',
  'LayoutTableCell',
]);

/** Boolean states shown in brackets after the name. */
const STATES = ['checked', 'disabled', 'expanded', 'selected', 'pressed', 'required'] as const;

/** Longest text kept from one node, in characters. */
const MAX_TEXT = 300;

export interface Snapshot {
  /** The tree as indented `- role "name" [ref=eN]` lines. */
  text: string;
  /** ref → backendDOMNodeId. */
  refs: Map<string, number>;
}

const str = (v: unknown): string =>
  typeof v === 'string' ? v : typeof v === 'number' || typeof v === 'boolean' ? String(v) : '';
const clip = (s: string) => (s.length > MAX_TEXT ? `${s.slice(0, MAX_TEXT)}…` : s);
const quote = (s: string) => JSON.stringify(clip(s.replace(/\s+/g, ' ').trim()));

/** Builds the snapshot of `nodes`; refs are numbered from 1 in document order. */
export function renderSnapshot(nodes: readonly AXNode[]): Snapshot {
  const byId = new Map(nodes.map((n) => [n.nodeId, n]));
  const root = nodes.find((n) => n.parentId === undefined) ?? nodes[0];
  const refs = new Map<string, number>();
  const lines: string[] = [];
  if (!root) return { text: '', refs };

  const walk = (node: AXNode, depth: number, parentName: string): void => {
    const role = str(node.role?.value);
    const name = str(node.name?.value).replace(/\s+/g, ' ').trim();
    const children = (node.childIds ?? []).flatMap((id) => byId.get(id) ?? []);
    if (role === 'StaticText') {
      // text already said by the parent's name adds nothing
      if (name && name !== parentName) lines.push(`${'  '.repeat(depth)}- text: ${quote(name)}`);
      return;
    }
    if (node.ignored || (TRANSPARENT.has(role) && !name) || role === '') {
      for (const c of children) walk(c, depth, parentName);
      return;
    }
    let line = `${'  '.repeat(depth)}- ${role}`;
    if (name) line += ` ${quote(name)}`;
    const props = new Map((node.properties ?? []).map((p) => [p.name, p.value?.value]));
    for (const s of STATES) {
      const v = props.get(s);
      if (v === true || v === 'true') line += ` [${s}]`;
      else if (s === 'checked' && v === 'mixed') line += ' [checked=mixed]';
    }
    const level = props.get('level');
    if (typeof level === 'number') line += ` [level=${level}]`;
    if (node.backendDOMNodeId !== undefined) {
      const ref = `e${refs.size + 1}`;
      refs.set(ref, node.backendDOMNodeId);
      line += ` [ref=${ref}]`;
    }
    const value = str(node.value?.value);
    if (value && value !== name) line += `: ${quote(value)}`;
    lines.push(line);
    for (const c of children) walk(c, depth + 1, name);
  };
  walk(root, 0, '');
  return { text: lines.join('\n'), refs };
}
