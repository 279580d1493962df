/**
 * The cluster schema, as the steps that build it: step N brings the schema from version N-1 to
 * N (database.ts applies them under the migration lock). A released step is never edited; a
 * change is a new step at the end.
 */
export const MIGRATIONS: readonly (readonly string[])[] = [
  // 1: nodes, instance rows, the id secret, sealed auth states
  [
    `CREATE TABLE nodes (
       name text PRIMARY KEY,
       run text NOT NULL,
       slot int NOT NULL UNIQUE,
       url text NOT NULL,
       capacity int NOT NULL,
       free_slots int NOT NULL,
       warm jsonb NOT NULL DEFAULT '{}'::jsonb,
       state text NOT NULL DEFAULT 'up',
       started_at timestamptz NOT NULL DEFAULT now(),
       lease_until timestamptz NOT NULL
     )`,
    `CREATE TABLE instances (
       id text PRIMARY KEY,
       seq bigserial NOT NULL,
       node text NOT NULL,
       run text NOT NULL,
       row jsonb NOT NULL,
       ended_reason text,
       updated_at timestamptz NOT NULL DEFAULT now()
     )`,
    'CREATE INDEX instances_seq ON instances (seq)',
    'CREATE INDEX instances_node ON instances (node, run)',
    // the secret instance ids are signed with (ids.ts): made by the first node, read by all
    `CREATE TABLE cluster_secret (
       one int PRIMARY KEY CHECK (one = 1),
       secret bytea NOT NULL
     )`,
    `CREATE TABLE auth_states (
       id text PRIMARY KEY,
       sealed text NOT NULL,
       updated_at timestamptz NOT NULL DEFAULT now()
     )`,
  ],
  // 2 (keys and projects, keys.ts): API keys stored as digests, each of one project; the
  // project an instance or an auth state belongs to (NULL: made with the admin key)
  [
    `CREATE TABLE api_keys (
       id text PRIMARY KEY,
       project text NOT NULL,
       name text,
       digest bytea NOT NULL UNIQUE,
       last4 text NOT NULL,
       created_at timestamptz NOT NULL DEFAULT now(),
       revoked_at timestamptz
     )`,
    'ALTER TABLE instances ADD COLUMN project text',
    'CREATE INDEX instances_project ON instances (project)',
    'ALTER TABLE auth_states ADD COLUMN project text',
  ],
  // 3 (extensions and profiles shared by the nodes: extension-backend.ts, profile-backend.ts):
  // uploaded extensions as their checked archives with a digest; sealed profiles by project and
  // name, with the hold of the instance using one (the admin's project is '')
  [
    `CREATE TABLE extensions (
       id text PRIMARY KEY,
       info jsonb NOT NULL,
       archive bytea NOT NULL,
       digest text NOT NULL,
       created_at timestamptz NOT NULL DEFAULT now()
     )`,
    `CREATE TABLE profiles (
       project text NOT NULL,
       name text NOT NULL,
       sealed bytea,
       size_bytes int NOT NULL DEFAULT 0,
       updated_at timestamptz NOT NULL DEFAULT now(),
       hold text,
       holder text,
       holder_node text,
       holder_run text,
       PRIMARY KEY (project, name)
     )`,
  ],
  // 4 (refused starts, refusals.ts): starts each node answered 429 or 503, per minute of the
  // database's clock, kept for an hour; the autoscaler's query adds the recent ones to the live
  // instances (scripts/deploy.ts)
  [
    `CREATE TABLE start_refusals (
       node text NOT NULL,
       minute timestamptz NOT NULL,
       status int NOT NULL,
       refused int NOT NULL,
       PRIMARY KEY (node, minute, status)
     )`,
  ],
];
