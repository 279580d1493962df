/**
 * The floor plan of the code, said once: which part of the package may import which. The
 * dependency checker (./deps.ts) applies it, `npm run lint` runs the checker
 * (scripts/check-deps.ts), ./dependencies.test.ts shows it refuses what it should, and
 * ./floor-plan.test.ts holds docs/architecture.md's table equal to SERVER_FLOORS, so the plan a
 * reader sees is the one the checker keeps.
 *
 * A module's part is its folder under src/ (`api`, `client`, `session`, `internal`, …) or
 * `adapters`; inside src/server/ it is its room: `server` for the entry point (index.ts),
 * `server/base` for the other modules at the top of the folder (errors, meta, config),
 * `server/<folder>` for the rest. A subfolder belongs to its room (`http/cluster/` is `server/http`,
 * `sandbox/space/` is `server/sandbox`).
 */

/**
 * The rooms of src/server/, top floor first (floor 1 of docs/architecture.md is the first row): a
 * room imports only rooms on the floors below its own, never a room beside it or above it. Every
 * folder of src/server/ has its row.
 */
export const SERVER_FLOORS: readonly (readonly string[])[] = [
  ['server'], // the composition root
  ['server/http'], // routes, bodies, limits, the API docs and MCP endpoints
  ['server/browser', 'server/ubuntu', 'server/mcp', 'server/cluster', 'server/profiles'], // the instance types, the MCP tools, the cluster's storage, profiles
  ['server/chromium', 'server/auth-states', 'server/extensions'], // what both types do with a Chromium, and what it loads
  ['server/instances'], // the runtime contract, registry, pool
  ['server/toolbox', 'server/artifacts'],
  ['server/sandbox'],
  ['server/computer', 'server/pages', 'server/host'],
  ['server/base'], // errors, meta, config
];

/** Each server room with the rooms it may import: one row per room, derived from the floors. */
export const SERVER_ROOMS: Readonly<Record<string, readonly string[]>> = Object.fromEntries(
  SERVER_FLOORS.flatMap((floor, i) =>
    floor.map((room) => [room, SERVER_FLOORS.slice(i + 1).flat()] as const),
  ),
);

/** The session's leaf module: the one module of src/ besides the entry points adapters use. */
export const DRIVER_MODULE = 'src/session/driver.ts';

/**
 * A part's rule of its own, besides the floors. `says` is the rule's words as a violation shows
 * them (`{to}` stands for the part imported).
 */
export interface PartRule {
  readonly says: string;
  /** The other parts of src/ it may import; absent: any the rest of its rule allows. */
  readonly onlyParts?: readonly string[];
  /** Parts it never imports (`server` stands for every room of src/server/). */
  readonly neverParts?: readonly string[];
  /** Outside modules (`pkg:<name>`, `node:<name>`) it may import; absent: any. */
  readonly onlyOutside?: readonly string[];
  /** It may load the server's entry point lazily, with `import()`, though it never imports it. */
  readonly lazyServerEntry?: true;
  /** It reaches the package only by its public entry points (by name) or these modules. */
  readonly throughEntryPoints?: { readonly besides: readonly string[] };
}

/** Every part with a rule of its own (docs/architecture.md, "Import rules"). */
export const PART_RULES: Readonly<Record<string, PartRule>> = {
  api: { says: 'api/ imports only zod (and itself)', onlyParts: [], onlyOutside: ['pkg:zod'] },
  internal: { says: 'internal/ is a leaf: it imports no other part of src/', onlyParts: [] },
  client: {
    says: 'client/ never imports server/ (session/ may only load its entry point with import())',
    neverParts: ['server'],
  },
  session: {
    says: 'session/ never imports server/ (session/ may only load its entry point with import())',
    neverParts: ['server'],
    lazyServerEntry: true,
  },
  server: { says: 'server/ never imports {to}/', neverParts: ['client', 'session'] },
  adapters: {
    says: `adapters import only the package's entry points ({package}, {package}/…) or ${DRIVER_MODULE}`,
    throughEntryPoints: { besides: [DRIVER_MODULE] },
  },
};

/**
 * Imports the rules refuse that are known and being removed, each with where that is tracked.
 * The checker and the test pass over them; the test fails once one of them is gone, so the list
 * only shrinks.
 */
export const KNOWN_VIOLATIONS: readonly { from: string; to: string; why: string }[] = [];

/** Cycles known and being removed, as `a -> b -> a` strings of the shortest cycle shown. */
export const KNOWN_CYCLES: readonly { cycle: string; why: string }[] = [];
