/**
 * The OpenAPI 3.1 description of the service, built from the operation table (operations.ts)
 * and its zod schemas with `z.toJSONSchema` (JSON Schema 2020-12, which OpenAPI 3.1 uses as
 * is): one operation per row, burrow's own rows marked `x-burrow-extension`, the `x-api-key`
 * security scheme, the FastAPI-shaped 422 and the `{"detail": "..."}` of every other error. The
 * server serves it at `GET /openapi.json`; test/contract/openapi.test.ts validates it.
 *
 * Not described, since OpenAPI has no words for them: the WebSocket endpoints (the CDP relay at
 * `/cdp/<id>/…` that `cdp_url` points to, and the live view's socket); both are reached through
 * URLs the API hands out, with their token in the query.
 */
import { z } from 'zod';
import * as artifacts from './artifacts.js';
import * as authStates from './auth-states.js';
import * as computer from './computer.js';
import * as meta from './meta.js';
import { operationIds, operations, type OperationSpec } from './operations.js';
import * as schemas from './schemas.js';

type Json = Record<string, unknown>;

/** One-line summaries of the rows, in burrow's words; a row missing here is named by its method. */
const SUMMARIES: Partial<Record<string, string>> = {
  start: 'Start an instance',
  getInstance: 'Get an instance',
  listInstances: 'List instances',
  listAuthStates: 'List saved browser authentication states',
  stop: 'Stop an instance',
  pause: 'Pause an instance',
  resume: 'Resume a paused instance',
  screenshot: 'Take a screenshot (PNG, base64)',
  streamUrl: 'Get the live-view URL',
  computer: 'Run a mouse or keyboard action',
  bash: 'Run a shell command',
  edit: 'View or edit a file (editor commands)',
  file: 'Read, write or list files',
  upload: 'Upload a file into the instance',
  browserStart: 'Start the browser; returns its CDP URL',
  browserCdpUrl: "Get the browser's CDP URL",
  browserCurrentUrl: "Get the active tab's URL",
  saveAuth: "Save the browser's authentication state",
  modifyAuth: 'Overwrite a saved authentication state',
  authenticate: 'Apply a saved authentication state',
  browserStop: 'Stop the browser',
  codeExecute: 'Run code on a kernel',
  listKernels: 'List kernels',
  notebookCreate: 'Create a notebook',
  notebookGet: 'Get a notebook',
  notebookDelete: 'Delete a notebook',
  notebookAddCell: 'Add a cell to a notebook',
  notebookExecuteCell: 'Execute one cell',
  notebookExecute: 'Execute every cell',
  envGet: 'Get environment variables',
  envSet: 'Set environment variables',
  envDelete: 'Delete environment variables',
  version: "burrow's, the API's and Chromium's versions",
  authStateStorageState: "A saved state in Playwright's storageState form",
  authStateImport: "Save a state given in Playwright's storageState form",
  authStateDelete: 'Delete a saved authentication state',
  listDownloads: "List the browser's downloads",
  getDownload: 'Fetch a download (bytes)',
  recordingStart: 'Start recording the screen',
  recordingStop: 'Stop recording the screen',
  listRecordings: 'List recordings',
  getRecording: 'Fetch a recording (bytes)',
};

export interface OpenApiOptions {
  /** `info.version`. Default: the API version (src/api/meta.ts). */
  version?: string | undefined;
  /** `servers[0].url`; absent, clients use the URL the document came from. */
  serverUrl?: string | undefined;
}

const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });
const jsonContent = (schema: Json) => ({ 'application/json': { schema } });

/** The named schemas of src/api, by identity, so a row's body or response can be a `$ref`. */
function namedSchemas(): Map<z.ZodType, string> {
  const names = new Map<z.ZodType, string>();
  for (const mod of [schemas, computer, authStates, artifacts, meta] as Record<string, unknown>[]) {
    for (const [name, value] of Object.entries(mod)) {
      if (value instanceof z.ZodType && !names.has(value)) names.set(value, name);
    }
  }
  return names;
}

/** JSON Schema of `schema` as OpenAPI 3.1 embeds it (no `$schema` keyword). */
function jsonSchema(schema: z.ZodType, io: 'input' | 'output'): Json {
  const { $schema: _, ...rest } = z.toJSONSchema(schema, {
    io,
    target: 'draft-2020-12',
    unrepresentable: 'any',
  }) as Json;
  return rest;
}

/** The parameters of a `params` or `query` object schema. */
function parameters(schema: z.ZodType | undefined, where: 'path' | 'query'): Json[] {
  if (!schema) return [];
  const js = jsonSchema(schema, 'input');
  const props = (js.properties ?? {}) as Record<string, Json>;
  const required = new Set((js.required ?? []) as string[]);
  return Object.entries(props).map(([name, s]) => ({
    name,
    in: where,
    required: where === 'path' || required.has(name),
    schema: s,
  }));
}

/** Builds the document; every call makes a fresh object. */
export function openApiDocument(options: OpenApiOptions = {}): Json {
  const names = namedSchemas();
  const components: Record<string, Json> = {
    ValidationErrorItem: {
      type: 'object',
      description: 'One problem with the request, as FastAPI reports it.',
      properties: {
        loc: {
          type: 'array',
          items: { anyOf: [{ type: 'string' }, { type: 'integer' }] },
          description: 'Where: `body`, `query` or `path`, then the field path.',
        },
        msg: { type: 'string' },
        type: { type: 'string', description: 'A stable code, e.g. `missing`, `int_parsing`.' },
        input: { description: 'The offending value, when there is one.' },
        ctx: { type: 'object', description: 'Values the message names (limits, choices).' },
      },
      required: ['loc', 'msg', 'type'],
    },
    HTTPValidationError: {
      type: 'object',
      properties: { detail: { type: 'array', items: ref('ValidationErrorItem') } },
      required: ['detail'],
    },
    Error: {
      type: 'object',
      properties: { detail: { type: 'string', description: 'What went wrong, for a person.' } },
      required: ['detail'],
    },
  };
  /** A `$ref` to a named schema (added to the components on first use), else the schema inline. */
  const seen = new Map<string, 'input' | 'output'>();
  const schemaOf = (schema: z.ZodType, io: 'input' | 'output'): Json => {
    const name = names.get(schema);
    if (!name) return jsonSchema(schema, io);
    // a schema read both ways may differ between them (defaults): one component per way
    const key = (seen.get(name) ?? io) === io ? name : `${name}_${io}`;
    seen.set(name, seen.get(name) ?? io);
    components[key] ??= jsonSchema(schema, io);
    return ref(key);
  };

  const errorHeader = {
    'x-burrow-error': {
      description: 'The stable code of the error (docs/server-errors.md).',
      schema: { type: 'string' },
    },
  };
  const errorResponse = (description: string) => ({
    description,
    headers: errorHeader,
    content: jsonContent(ref('Error')),
  });

  const paths: Record<string, Record<string, Json>> = {};
  for (const id of operationIds) {
    const op: OperationSpec = operations[id];
    const operation: Json = {
      operationId: id,
      summary: SUMMARIES[id] ?? op.client.join('.'),
      description: `Client method: \`${op.client.join('.')}()\`.${
        op.extension ? ' burrow extension: not part of the API description it implements.' : ''
      }`,
      tags: [op.client[0]],
      ...(op.extension && { 'x-burrow-extension': true }),
      'x-burrow-idempotent': op.idempotent,
    };
    const params = [...parameters(op.params, 'path'), ...parameters(op.query, 'query')];
    if (params.length > 0) operation.parameters = params;
    if (op.bodyKind === 'json' && op.body) {
      operation.requestBody = { required: true, content: jsonContent(schemaOf(op.body, 'input')) };
    } else if (op.bodyKind === 'multipart') {
      const fields = op.body ? jsonSchema(op.body, 'input') : { type: 'object', properties: {} };
      const props = (fields.properties ?? {}) as Json;
      operation.requestBody = {
        required: true,
        content: {
          'multipart/form-data': {
            schema: {
              type: 'object',
              properties: {
                ...props,
                file: { type: 'string', contentMediaType: 'application/octet-stream' },
              },
              required: [...((fields.required ?? []) as string[]), 'file'],
            },
          },
        },
      };
    }
    const ok =
      op.responseKind === 'stream'
        ? {
            description: 'The bytes, streamed.',
            content: {
              'application/octet-stream': {
                schema: { type: 'string', contentMediaType: 'application/octet-stream' },
              },
            },
          }
        : { description: 'Success.', content: jsonContent(schemaOf(op.response, 'output')) };
    const responses: Json = {
      [String(op.successStatus ?? 200)]: ok,
      '401': errorResponse('Missing or wrong API key.'),
    };
    if (op.params || op.query || op.bodyKind !== 'none') {
      responses['422'] = {
        description: 'The request does not match its schema.',
        content: jsonContent(ref('HTTPValidationError')),
      };
    }
    responses.default = errorResponse('Any other error: its status and `detail`.');
    operation.responses = responses;
    (paths[op.path] ??= {})[op.method.toLowerCase()] = operation;
  }

  paths['/stream/{instance_id}/'] = {
    get: {
      operationId: 'liveViewPage',
      summary: "An instance's live-view page (HTML)",
      description:
        'The page `stream_url` points to. Authenticated by the token in its query, not the API key; it then opens a WebSocket on the same prefix.',
      tags: ['pages'],
      'x-burrow-extension': true,
      security: [],
      parameters: [
        { name: 'instance_id', in: 'path', required: true, schema: { type: 'string' } },
        { name: 'token', in: 'query', required: true, schema: { type: 'string' } },
      ],
      responses: {
        '200': {
          description: 'The page.',
          content: { 'text/html': { schema: { type: 'string' } } },
        },
        default: errorResponse('A wrong token (401), an unknown instance (404), no live view.'),
      },
    },
  };
  const mcp = (method: string): Json => ({
    operationId: `mcp${method}`,
    summary: `MCP over Streamable HTTP (${method})`,
    description:
      'The Model Context Protocol server (src/server/mcp/): JSON-RPC 2.0 messages, the session in the `mcp-session-id` header. POST sends a message (the first one `initialize`), GET opens the stream of server messages, DELETE ends the session and stops its instances.',
    tags: ['mcp'],
    'x-burrow-extension': true,
    ...(method === 'POST' && {
      requestBody: { required: true, content: jsonContent({ type: 'object' }) },
    }),
    responses: {
      '200': {
        description: 'A JSON-RPC answer, as JSON or as a server-sent event stream.',
        content: {
          'application/json': { schema: { type: 'object' } },
          'text/event-stream': { schema: { type: 'string' } },
        },
      },
      '401': errorResponse('Missing or wrong API key.'),
      default: {
        description: 'A JSON-RPC error object.',
        content: jsonContent({ type: 'object' }),
      },
    },
  });
  paths['/mcp'] = { post: mcp('POST'), get: mcp('GET'), delete: mcp('DELETE') };
  paths['/openapi.json'] = {
    get: {
      operationId: 'openapi',
      summary: 'This document',
      tags: ['pages'],
      'x-burrow-extension': true,
      security: [],
      responses: {
        '200': { description: 'OpenAPI 3.1.', content: jsonContent({ type: 'object' }) },
      },
    },
  };
  paths['/docs'] = {
    get: {
      operationId: 'apiPage',
      summary: 'An interactive page for this API (no external resources)',
      tags: ['pages'],
      'x-burrow-extension': true,
      security: [],
      responses: {
        '200': {
          description: 'The page.',
          content: { 'text/html': { schema: { type: 'string' } } },
        },
      },
    },
  };

  return {
    openapi: '3.1.1',
    info: {
      title: 'Remote Instance Control Service (burrow)',
      version: options.version ?? meta.API_VERSION,
      summary: 'Start and control remote browser and Linux instances over HTTP.',
      description:
        'Generated from burrow\'s operation table (src/api/operations.ts). Operations marked `x-burrow-extension` are burrow\'s own. Not described here: the WebSocket endpoints under `/cdp/` (the `cdp_url` relay) and `/stream/` (the live view), reached through the URLs the API returns, each with its own token. Every error other than a 422 is `{"detail": "..."}` with an `x-burrow-error` code header.',
      license: { name: 'MIT', identifier: 'MIT' },
    },
    ...(options.serverUrl && { servers: [{ url: options.serverUrl }] }),
    security: [{ apiKey: [] }],
    tags: [
      ...new Set<string>(operationIds.map((id) => operations[id].client[0])),
      'mcp',
      'pages',
    ].map((name) => ({ name })),
    paths,
    components: {
      schemas: components,
      securitySchemes: {
        apiKey: {
          type: 'apiKey',
          in: 'header',
          name: 'x-api-key',
          description: "The server's API key (BURROW_API_KEY).",
        },
      },
    },
  };
}
