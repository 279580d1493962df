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
];
