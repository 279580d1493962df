/**
 * The files that run a cluster (deploy/): the Kubernetes manifests are what scripts/deploy.ts
 * makes from typed objects and type-check against the models, kubectl renders the base and the
 * KEDA component offline, a misspelled field or a value of the wrong type fails the check, and
 * the three-node compose file has the shape docs/cluster.md describes.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parse, parseAllDocuments } from 'yaml';
import { check, OUT, ROOT, typeCheck } from '../../scripts/deploy.js';

const scratch = mkdtempSync(join(tmpdir(), 'burrow-deploy-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const kustomize = (dir: string): Record<string, unknown>[] =>
  parseAllDocuments(
    execFileSync('kubectl', ['kustomize', dir], { encoding: 'utf8', stdio: 'pipe' }),
  ).map((d) => d.toJS() as Record<string, unknown>);

describe('deploy/kubernetes', () => {
  it('is what scripts/deploy.ts makes, and type-checks against the models', async () => {
    expect(await check()).toEqual([]);
  }, 60_000);

  it('renders offline with kubectl kustomize: the base, and the base with the KEDA component', () => {
    const base = kustomize(OUT);
    expect(base.map((o) => o.kind).sort()).toEqual([
      'ConfigMap',
      'PodDisruptionBudget',
      'Service',
      'Service',
      'StatefulSet',
    ]);
    const set = base.find((o) => o.kind === 'StatefulSet') as {
      spec: {
        template: {
          spec: {
            terminationGracePeriodSeconds: number;
            containers: {
              image: string;
              securityContext: { privileged: boolean };
              env: { name: string; value?: string }[];
            }[];
          };
        };
      };
    };
    const pod = set.spec.template.spec;
    const env = Object.fromEntries(pod.containers[0]!.env.map((e) => [e.name, e.value]));
    expect(pod.containers[0]!.image).toBe('localhost/burrow:latest');
    expect(pod.containers[0]!.securityContext.privileged).toBe(true);
    // the pod outlives the drain deadline, so a drain ends before the kubelet kills it
    expect(pod.terminationGracePeriodSeconds).toBeGreaterThan(Number(env.BURROW_DRAIN_SECONDS));

    // an overlay elsewhere, as an operator writes one: the base plus the KEDA component
    const overlay = join(scratch, 'overlay');
    execFileSync('mkdir', ['-p', overlay]);
    writeFileSync(
      join(overlay, 'kustomization.yaml'),
      [
        'namespace: burrow',
        'resources:',
        `  - ${relative(overlay, OUT)}`,
        'components:',
        `  - ${relative(overlay, join(OUT, 'keda'))}`,
        '',
      ].join('\n'),
    );
    const all = kustomize(overlay);
    const scaled = all.find((o) => o.kind === 'ScaledObject') as {
      metadata: { namespace: string };
      spec: { triggers: { type: string; metadata: Record<string, string> }[] };
    };
    expect(scaled.metadata.namespace).toBe('burrow');
    expect(scaled.spec.triggers[0]!.type).toBe('postgresql');
    expect(scaled.spec.triggers[0]!.metadata.query).toContain('burrow.instances');
  }, 30_000);

  it('fails the check on a misspelled field and on a value of the wrong type', () => {
    const statefulSet = readFileSync(join(OUT, 'statefulset.yaml'), 'utf8');
    const misspelled = statefulSet.replace(
      'terminationGracePeriodSeconds:',
      'terminationGracePeriod:',
    );
    const wrongType = statefulSet.replace('replicas: 3', 'replicas: three');
    expect(misspelled).not.toBe(statefulSet);
    expect(wrongType).not.toBe(statefulSet);
    // one compiler run for all: each file's problems are told apart by its path
    const problems = typeCheck(
      new Map([
        ['as-made.yaml', statefulSet],
        ['misspelled.yaml', misspelled],
        ['wrong-type.yaml', wrongType],
        ['unknown-kind.yaml', 'apiVersion: v1\nkind: Nonsense\nmetadata: { name: x }\n'],
      ]),
    );
    const of = (path: string) => problems.filter((p) => p.path === path).map((p) => p.message);
    expect(of('as-made.yaml')).toEqual([]);
    expect(of('misspelled.yaml')).toHaveLength(1);
    expect(of('misspelled.yaml')[0]).toMatch(/terminationGracePeriod.*does not exist/s);
    expect(of('wrong-type.yaml').join('\n')).toMatch(/replicas.*not assignable to type 'number'/s);
    expect(of('unknown-kind.yaml')).toEqual(['no typed model for v1 Nonsense']);
    expect(problems).toHaveLength(of('misspelled.yaml').length + of('wrong-type.yaml').length + 1);
  }, 60_000);
});

describe('deploy/compose.cluster.yaml', () => {
  const compose = parse(readFileSync(join(ROOT, 'deploy/compose.cluster.yaml'), 'utf8'), {
    merge: true,
  }) as {
    services: Record<
      string,
      {
        image: string;
        privileged?: boolean;
        cgroup?: string;
        ports?: string[];
        environment?: Record<string, string>;
        depends_on?: Record<string, { condition: string }>;
        secrets?: string[];
        healthcheck?: { test: string[] };
        command?: string[];
      }
    >;
    secrets: Record<string, { file: string }>;
    volumes: Record<string, unknown>;
  };
  const nodes = Object.entries(compose.services).filter(([, s]) => s.image.includes('burrow'));

  it('runs three privileged nodes on one PostgreSQL 15', () => {
    expect(nodes.map(([name]) => name)).toEqual(['node-1', 'node-2', 'node-3']);
    expect(compose.services.postgres!.image).toMatch(/postgres(ql)?:15|postgresql-15/);
    expect(compose.services.postgres!.healthcheck?.test.join(' ')).toContain('pg_isready');
    for (const [name, s] of nodes) {
      expect(s.privileged, name).toBe(true);
      expect(s.cgroup, name).toBe('private');
      expect(s.depends_on?.postgres?.condition, name).toBe('service_healthy');
    }
  });

  it('gives every node the same database, keys and public URL, and a name and URL of its own', () => {
    const env = nodes.map(([, s]) => s.environment!);
    for (const shared of ['BURROW_DATABASE_URL', 'BURROW_API_KEY_FILE', 'BURROW_SECRET_KEY_FILE']) {
      expect(new Set(env.map((e) => e[shared])).size, shared).toBe(1);
      expect(env[0]![shared], shared).toBeTruthy();
    }
    expect(env[0]!.BURROW_DATABASE_URL).toMatch(/^postgres:\/\/[^@]+@postgres:5432\//);
    expect(env.map((e) => e.BURROW_NODE_NAME)).toEqual(['node-1', 'node-2', 'node-3']);
    expect(env.map((e) => e.BURROW_NODE_URL)).toEqual([
      'http://node-1:8787',
      'http://node-2:8787',
      'http://node-3:8787',
    ]);
    for (const [name, s] of nodes) {
      expect(s.secrets?.sort(), name).toEqual(['burrow_api_key', 'burrow_secret_key']);
      expect(s.command?.join(' '), name).toContain('--public-url');
    }
    // each node is published on its own loopback port; no file in the checkout holds a key
    expect(nodes.map(([, s]) => s.ports)).toEqual([
      ['127.0.0.1:8787:8787'],
      ['127.0.0.1:8788:8787'],
      ['127.0.0.1:8789:8787'],
    ]);
    for (const s of Object.values(compose.secrets)) expect(s.file).toMatch(/^\.\.\/burrow-/);
  });
});
