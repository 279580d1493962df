/**
 * The Kubernetes manifests under deploy/kubernetes/, made from typed objects (the
 * `kubernetes-models` package, and `@kubernetes-models/keda` for the ScaledObject) so that a
 * field Kubernetes does not know is a type error here, not a surprise at `kubectl apply`.
 *
 *   node --import tsx scripts/deploy.ts           write the files (npm run -s deploy)
 *   node --import tsx scripts/deploy.ts --check   exit 1 when a committed file differs from what
 *                                                 this script makes, or does not validate
 *
 * Every file is validated twice before it is written or compared: each object by its model's
 * own schema check (types, formats, required fields), and the YAML as read back through the
 * TypeScript compiler against the model's interface, which is where a misspelled or unknown
 * field fails (the models' schema check lets unknown fields through). test/repo/deploy.test.ts
 * runs the check, renders the base with `kubectl kustomize`, and shows a misspelled field fail.
 *
 * docs/cluster.md says how the pieces fit; the values here follow docs/image.md (the privileges
 * of the sandbox's root level) and docs/configuration.md (the settings).
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ScaledObject } from '@kubernetes-models/keda/keda.sh/v1alpha1/ScaledObject';
import { StatefulSet } from 'kubernetes-models/apps/v1/StatefulSet';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget';
import { ConfigMap } from 'kubernetes-models/v1/ConfigMap';
import { Secret } from 'kubernetes-models/v1/Secret';
import { Service } from 'kubernetes-models/v1/Service';
import { format, resolveConfig } from 'prettier';
import ts from 'typescript';
import { parseAllDocuments, stringify } from 'yaml';

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
export const OUT = join(ROOT, 'deploy', 'kubernetes');

/**
 * The port clients and other nodes use (the image's `BURROW_PORT`); it also answers the probes,
 * `GET /readyz` and `GET /livez`, without a key (src/server/instances/health.ts).
 */
const PORT = 8787;
/**
 * How long a node being stopped keeps its open sockets before it ends what still runs
 * (`BURROW_DRAIN_SECONDS`); the pod's grace period is this plus time to stop the instances.
 */
const DRAIN_SECONDS = 300;
const STOP_SECONDS = 30;
/** Live instances one node is meant to carry when KEDA sizes the cluster. */
const INSTANCES_PER_NODE = 8;

const NAME = 'burrow';
const NODES = 'burrow-nodes';
const labels = { 'app.kubernetes.io/name': NAME, 'app.kubernetes.io/component': 'node' };
const SECRETS_DIR = '/run/secrets/burrow';

/** The cluster's settings every node shares; more `BURROW_*` settings go here (configuration.md). */
const settings = new ConfigMap({
  metadata: { name: 'burrow-settings' },
  data: {
    // the base of cdp_url and stream_url: what clients reach, the Service below or an ingress
    BURROW_PUBLIC_URL: `http://${NAME}:${PORT}`,
    BURROW_LEASE_SECONDS: '15',
    BURROW_LOG_FORMAT: 'json',
  },
});

/** What each node needs and no file in the repository holds: a template, not applied by the base. */
const secret = new Secret({
  metadata: { name: NAME },
  type: 'Opaque',
  stringData: {
    // the cluster's PostgreSQL (15 or later); every node uses the same one
    'database-url': 'postgres://burrow:CHANGE-ME@postgres:5432/burrow',
    // the key clients send as x-api-key: `openssl rand -hex 24`
    'api-key': 'CHANGE-ME',
    // the key that seals auth states, the same on every node: `openssl rand -base64 32`
    'secret-key': 'CHANGE-ME',
  },
});

/** The clients' way in: any ready node answers and forwards to the instance's owner. */
const service = new Service({
  metadata: { name: NAME, labels },
  spec: {
    selector: labels,
    ports: [{ name: 'http', port: PORT, targetPort: 'http' }],
  },
});

/**
 * One DNS name per node (`burrow-0.burrow-nodes`), what nodes forward to. Not-ready nodes stay
 * in it: a draining node is not ready but still answers for its instances.
 */
const nodesService = new Service({
  metadata: { name: NODES, labels },
  spec: {
    clusterIP: 'None',
    publishNotReadyAddresses: true,
    selector: labels,
    ports: [{ name: 'http', port: PORT, targetPort: 'http' }],
  },
});

const statefulSet = new StatefulSet({
  metadata: { name: NAME, labels },
  spec: {
    serviceName: NODES,
    replicas: 3,
    // nodes do not wait for each other: each takes its slot in the database on its own
    podManagementPolicy: 'Parallel',
    selector: { matchLabels: labels },
    template: {
      metadata: { labels },
      spec: {
        // one node per machine: a node's instances use the machine's loop devices and cgroups
        affinity: {
          podAntiAffinity: {
            requiredDuringSchedulingIgnoredDuringExecution: [
              { labelSelector: { matchLabels: labels }, topologyKey: 'kubernetes.io/hostname' },
            ],
          },
        },
        terminationGracePeriodSeconds: DRAIN_SECONDS + STOP_SECONDS,
        containers: [
          {
            name: NAME,
            image: NAME,
            args: ['burrow', 'serve', '--public-url', '$(BURROW_PUBLIC_URL)'],
            // the sandbox's root level (docs/image.md, "Privileges"): root in the container (the
            // image's default user is a normal one), namespaces, mounts, veth pairs, loop devices
            // and a writable cgroup file system
            securityContext: { privileged: true, runAsUser: 0, runAsGroup: 0 },
            ports: [{ name: 'http', containerPort: PORT }],
            envFrom: [{ configMapRef: { name: 'burrow-settings' } }],
            env: [
              {
                name: 'POD_NAMESPACE',
                valueFrom: { fieldRef: { fieldPath: 'metadata.namespace' } },
              },
              // the pod's name is the node's name: stable across restarts, so it keeps its slot
              { name: 'BURROW_NODE_NAME', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
              {
                name: 'BURROW_NODE_URL',
                value: `http://$(BURROW_NODE_NAME).${NODES}.$(POD_NAMESPACE).svc:${PORT}`,
              },
              {
                name: 'BURROW_DATABASE_URL',
                valueFrom: { secretKeyRef: { name: NAME, key: 'database-url' } },
              },
              { name: 'BURROW_API_KEY_FILE', value: `${SECRETS_DIR}/api-key` },
              { name: 'BURROW_SECRET_KEY_FILE', value: `${SECRETS_DIR}/secret-key` },
              { name: 'BURROW_DRAIN_SECONDS', value: String(DRAIN_SECONDS) },
            ],
            // ready = this node can start a sandbox; it turns false at once when a drain begins
            readinessProbe: {
              httpGet: { path: '/readyz', port: 'http' },
              periodSeconds: 5,
              failureThreshold: 2,
            },
            livenessProbe: {
              httpGet: { path: '/livez', port: 'http' },
              periodSeconds: 10,
              failureThreshold: 3,
            },
            // the boot self-test starts a sandbox: up to 5 minutes before liveness counts
            startupProbe: {
              httpGet: { path: '/livez', port: 'http' },
              periodSeconds: 5,
              failureThreshold: 60,
            },
            resources: { requests: { cpu: '2', memory: '4Gi' } },
            volumeMounts: [
              { name: 'data', mountPath: '/var/lib/burrow' },
              { name: 'secrets', mountPath: SECRETS_DIR, readOnly: true },
            ],
          },
        ],
        volumes: [
          // the instances' disk images and scratch: nothing here outlives the pod (instance rows
          // and auth states are in the database)
          { name: 'data', emptyDir: {} },
          {
            name: 'secrets',
            secret: {
              secretName: NAME,
              defaultMode: 0o400,
              items: [
                { key: 'api-key', path: 'api-key' },
                { key: 'secret-key', path: 'secret-key' },
              ],
            },
          },
        ],
      },
    },
  },
});

/** A voluntary disruption (a node drain, an upgrade) takes one node at a time. */
const disruptionBudget = new PodDisruptionBudget({
  metadata: { name: NAME, labels },
  spec: { maxUnavailable: 1, selector: { matchLabels: labels } },
});

/**
 * What KEDA sizes the StatefulSet by: the demand, as live instances plus the starts refused
 * lately. Every node counts the starts it answered 429 (no room) or 503 (draining, database
 * away) per minute of the database's clock (src/server/cluster/refusals.ts); the query adds
 * those of the current minute and the one before, so a burst the cluster could not take asks
 * for nodes while it lasts and stops asking a minute or two after. A client that retries is
 * counted each time it is refused: the demand reads high while refusals go on, never low.
 */
export const SCALE_QUERY = [
  `SELECT (SELECT count(*) FROM burrow.instances`,
  `WHERE row->>'status' IN ('deploying', 'running', 'paused'))`,
  `+ (SELECT coalesce(sum(refused), 0) FROM burrow.start_refusals`,
  `WHERE minute >= date_trunc('minute', now()) - interval '1 minute')`,
].join(' ');

const scaledObject = new ScaledObject({
  metadata: { name: NAME, labels },
  spec: {
    scaleTargetRef: { apiVersion: 'apps/v1', kind: 'StatefulSet', name: NAME },
    // never to zero: some node must answer the API
    minReplicaCount: 1,
    maxReplicaCount: 10,
    pollingInterval: 30,
    // scaling in drains the node with the highest ordinal: not more often than a drain takes
    cooldownPeriod: DRAIN_SECONDS * 2,
    triggers: [
      {
        type: 'postgresql',
        metadata: {
          // read from the StatefulSet's container (the Secret above), as the nodes read it
          connectionFromEnv: 'BURROW_DATABASE_URL',
          query: SCALE_QUERY,
          targetQueryValue: String(INSTANCES_PER_NODE),
          activationTargetQueryValue: '0',
        },
      },
    ],
  },
});

/** A Kustomization or Component, the few fields used here (kustomize has no typed model on npm). */
type Kustomization = {
  resources: string[];
  labels?: { pairs: Record<string, string>; includeSelectors: boolean }[];
  images?: { name: string; newName?: string; newTag?: string }[];
} & (
  | { apiVersion: 'kustomize.config.k8s.io/v1beta1'; kind: 'Kustomization' }
  | { apiVersion: 'kustomize.config.k8s.io/v1alpha1'; kind: 'Component' }
);

const base: Kustomization = {
  apiVersion: 'kustomize.config.k8s.io/v1beta1',
  kind: 'Kustomization',
  resources: [
    'configmap.yaml',
    'service.yaml',
    'service-nodes.yaml',
    'statefulset.yaml',
    'poddisruptionbudget.yaml',
  ],
  labels: [{ pairs: { 'app.kubernetes.io/part-of': NAME }, includeSelectors: false }],
  // the image built from ./Containerfile; an overlay names its registry's copy
  images: [{ name: NAME, newName: 'localhost/burrow', newTag: 'latest' }],
};

/** A component, not an overlay: an overlay of the base cannot live inside the base's folder. */
const keda: Kustomization = {
  apiVersion: 'kustomize.config.k8s.io/v1alpha1',
  kind: 'Component',
  resources: ['scaledobject.yaml'],
};

interface File {
  /** Path under deploy/kubernetes/. */
  path: string;
  /** The comment the file opens with. */
  about: string;
  object: { toJSON(): unknown; validate?(): void } | Kustomization;
}

const FILES: readonly File[] = [
  {
    path: 'kustomization.yaml',
    about:
      'The base: burrow nodes as a StatefulSet, their Services and disruption budget.\nApply a filled-in copy of secret.example.yaml first; the component keda/ adds\nautoscaling. docs/cluster.md says how.',
    object: base,
  },
  { path: 'configmap.yaml', about: 'Settings every node shares.', object: settings },
  {
    path: 'secret.example.yaml',
    about:
      'A template, not part of the base: fill in the three values, then\n`kubectl apply -f` it (or `kubectl create secret generic burrow --from-literal=...`).',
    object: secret,
  },
  { path: 'service.yaml', about: 'Clients connect here (the public URL).', object: service },
  {
    path: 'service-nodes.yaml',
    about: 'Headless: each node’s own DNS name, which the other nodes forward to.',
    object: nodesService,
  },
  {
    path: 'statefulset.yaml',
    about: 'The nodes: one privileged pod per machine (docs/image.md, "Privileges").',
    object: statefulSet,
  },
  { path: 'poddisruptionbudget.yaml', about: 'One node down at a time.', object: disruptionBudget },
  {
    path: 'keda/kustomization.yaml',
    about:
      'A component: an overlay that lists the base under `resources` and this folder under\n`components` gets KEDA autoscaling too (needs KEDA 2.x in the cluster).',
    object: keda,
  },
  {
    path: 'keda/scaledobject.yaml',
    about: 'Nodes by load, read from the cluster database (scripts/deploy.ts says what it counts).',
    object: scaledObject,
  },
];

const HEADER =
  'Made by scripts/deploy.ts from typed objects: edit it there, then `npm run -s deploy`.';

/** The interface and module of each kind's model: what the YAML is type-checked against. */
const MODELS: Record<string, { module: string; type: string }> = {
  'apps/v1 StatefulSet': { module: 'kubernetes-models/apps/v1/StatefulSet', type: 'IStatefulSet' },
  'v1 Service': { module: 'kubernetes-models/v1/Service', type: 'IService' },
  'v1 ConfigMap': { module: 'kubernetes-models/v1/ConfigMap', type: 'IConfigMap' },
  'v1 Secret': { module: 'kubernetes-models/v1/Secret', type: 'ISecret' },
  'policy/v1 PodDisruptionBudget': {
    module: 'kubernetes-models/policy/v1/PodDisruptionBudget',
    type: 'IPodDisruptionBudget',
  },
  'keda.sh/v1alpha1 ScaledObject': {
    module: '@kubernetes-models/keda/keda.sh/v1alpha1/ScaledObject',
    type: 'IScaledObject',
  },
};

/** The files as this script makes them: path under deploy/kubernetes/ → YAML text. */
export async function render(): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  for (const f of FILES) {
    if ('validate' in f.object && f.object.validate) f.object.validate();
    const json = 'toJSON' in f.object ? f.object.toJSON() : f.object;
    const comment = [HEADER, '', ...f.about.split('\n')].map((l) => `# ${l}`.trimEnd()).join('\n');
    const yaml = `${comment}\n${stringify(json, { lineWidth: 0 })}`;
    // formatted as `prettier --check .` wants it (the repository's .prettierrc)
    const filepath = join(OUT, f.path);
    const config = await resolveConfig(filepath);
    out.set(f.path, await format(yaml, { ...config, parser: 'yaml', filepath }));
  }
  return out;
}

/** Where a type-check diagnostic points, as `path: message`. */
export interface Problem {
  path: string;
  message: string;
}

/**
 * Type-checks YAML files against the models: each document whose kind has a model becomes a
 * fresh object literal of that model's interface, so an unknown or misspelled field is an
 * excess-property error, and a value of the wrong type an assignment error. A document of a
 * kind without a model is a problem too, except kustomize's own files (kubectl kustomize reads
 * those).
 */
export function typeCheck(files: ReadonlyMap<string, string>): Problem[] {
  const problems: Problem[] = [];
  const lines: string[] = [];
  const imports = new Map<string, string>();
  const origin: { path: string; start: number; end: number }[] = [];
  for (const [path, text] of files) {
    for (const doc of parseAllDocuments(text)) {
      if ('errors' in doc && doc.errors.length > 0) {
        problems.push({ path, message: doc.errors.map((e) => e.message).join('; ') });
        continue;
      }
      const value = doc.toJS() as { apiVersion?: string; kind?: string } | null;
      if (value === null) continue;
      if (value.kind === 'Kustomization' || value.kind === 'Component') continue;
      const model = MODELS[`${value.apiVersion} ${value.kind}`];
      if (!model) {
        problems.push({ path, message: `no typed model for ${value.apiVersion} ${value.kind}` });
        continue;
      }
      const alias = `T${imports.size}`;
      if (!imports.has(model.module)) imports.set(model.module, alias);
      const start = lines.length;
      const body = JSON.stringify(value, null, 2).split('\n');
      lines.push(`export const d${origin.length}: ${imports.get(model.module)}.${model.type} =`);
      lines.push(...body, ';');
      origin.push({ path, start, end: lines.length });
    }
  }
  const head = [...imports].map(([m, alias]) => `import type * as ${alias} from '${m}';`);
  const source = [...head, ...lines].join('\n');
  const file = join(ROOT, 'scripts', '.deploy-check.ts');
  const options: ts.CompilerOptions = {
    strict: true,
    noEmit: true,
    skipLibCheck: true,
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    types: [],
  };
  const host = ts.createCompilerHost(options);
  const read = host.readFile.bind(host);
  const exists = host.fileExists.bind(host);
  const getSource = host.getSourceFile.bind(host);
  host.readFile = (f) => (f === file ? source : read(f));
  host.fileExists = (f) => f === file || exists(f);
  host.getSourceFile = (f, lang, ...rest) =>
    f === file ? ts.createSourceFile(f, source, lang, true) : getSource(f, lang, ...rest);
  const program = ts.createProgram([file], options, host);
  for (const d of ts.getPreEmitDiagnostics(program)) {
    const message = ts.flattenDiagnosticMessageText(d.messageText, '\n');
    if (d.file?.fileName !== file || d.start === undefined) {
      problems.push({ path: '(models)', message });
      continue;
    }
    const line = d.file.getLineAndCharacterOfPosition(d.start).line - head.length;
    const at = origin.find((o) => line >= o.start && line < o.end);
    const text = d.file.text.slice(d.start, d.start + (d.length ?? 0));
    problems.push({ path: at?.path ?? '(unknown)', message: `${text}: ${message}` });
  }
  return problems;
}

/** What differs between the committed files and `render()`'s, and what does not type-check. */
export async function check(): Promise<string[]> {
  const made = await render();
  const out: string[] = [];
  const committed = new Map<string, string>();
  for (const [path, text] of made) {
    let now: string;
    try {
      now = readFileSync(join(OUT, path), 'utf8');
    } catch {
      out.push(`${path}: missing`);
      continue;
    }
    committed.set(path, now);
    if (now !== text) out.push(`${path}: differs from what scripts/deploy.ts makes`);
  }
  for (const p of typeCheck(committed)) out.push(`${p.path}: ${p.message}`);
  return out;
}

async function main(): Promise<void> {
  if (process.argv.includes('--check')) {
    const problems = await check();
    for (const p of problems) console.error(`deploy/kubernetes/${p}`);
    process.exitCode = problems.length > 0 ? 1 : 0;
    return;
  }
  const made = await render();
  const problems = typeCheck(made);
  if (problems.length > 0) {
    for (const p of problems) console.error(`${p.path}: ${p.message}`);
    process.exitCode = 1;
    return;
  }
  for (const [path, text] of made) {
    const to = join(OUT, path);
    mkdirSync(dirname(to), { recursive: true });
    writeFileSync(to, text);
    console.log(relative(ROOT, to));
  }
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) await main();
