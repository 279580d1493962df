/**
 * The contract: every row of the operation table has a client method and a server route, and
 * every operation works through the real client against the real server (the client checks each
 * response against its schema, so a wrong shape fails as ContractError). Each operation also gets
 * at least one invalid input: refused before sending by the client, and by the server with its
 * FastAPI-shaped 422 (or the 404/400 a path-only operation can produce).
 *
 * The cases are in operations-cases-instances.ts and operations-cases-extensions.ts, the server
 * they run against in operations-harness.ts.
 */
import { describe, expect, it } from 'vitest';
import { operationIds, operations, type OperationId } from '../../src/api/index.js';
import { extensionCases } from './operations-cases-extensions.js';
import { instanceCases } from './operations-cases-instances.js';
import { client, server, useServer, type Case } from './operations-harness.js';

useServer();

// Ordered: later cases use what earlier ones made (the auth state, the notebook and its cell).
const cases: Record<OperationId, Case> = { ...instanceCases, ...extensionCases };

describe('operation table coverage', () => {
  it('every operation has a case here, a client method and a server route', async () => {
    expect(Object.keys(cases).sort()).toEqual([...operationIds].sort());
    for (const id of operationIds) {
      const [group, method] = operations[id].client;
      const g = (client as unknown as Record<string, Record<string, unknown>>)[group];
      expect(typeof g?.[method], `${group}.${method}`).toBe('function');
      // drained on a server of its own (its case): this one must go on serving
      if (id === 'nodeDrain') continue;
      // A registered route answers for an unknown instance; an unregistered one says "Not Found".
      const path = operations[id].path.replace(/\{\w+\}/g, 'zz_unknown');
      const res = await server.api(path, { method: operations[id].method });
      const body = (await res.json()) as { detail: unknown };
      expect(body.detail, `${operations[id].method} ${operations[id].path}`).not.toBe('Not Found');
    }
  });
});

describe('every operation through the client', () => {
  for (const id of Object.keys(cases) as OperationId[]) {
    it(`${id}: success`, () => cases[id].ok());
    it(`${id}: invalid input`, () => cases[id].bad());
  }
});
