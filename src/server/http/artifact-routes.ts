/**
 * The routes of downloads and recordings (burrow extension, src/api/artifacts.ts): the JSON rows
 * are handlers in the table's loop (handlers.ts spreads `artifactHandlers`), the two byte-stream
 * rows are routes of their own, registered here with the same 422 and `{"detail"}` shapes.
 * Artifacts outlive the instance's processes (src/server/artifacts/store.ts), so everything but
 * `recording/start` answers for stopped instances too.
 */
import type { FastifyInstance, FastifyReply } from 'fastify';
import type { z } from 'zod';
import {
  DownloadPath,
  operations,
  RecordingPath,
  validationDetail,
  wireParse,
  type Location,
  type Operations,
} from '../../api/index.js';
import {
  contentDisposition,
  type InstanceArtifacts,
  type OpenedArtifact,
} from '../artifacts/store.js';
import { serverError } from '../errors.js';
import type { Registry } from '../instances/registry.js';
import { RequestInvalid } from './request-body.js';

/** A handler of one of these rows (the shape of handlers.ts's, which spreads them in). */
type Handler<Op extends 'listDownloads' | 'recordingStart' | 'recordingStop' | 'listRecordings'> =
  (input: {
    params: z.output<Operations[Op]['params']>;
  }) => Promise<z.input<Operations[Op]['response']>>;

/**
 * The artifacts of instance `id` (404 unknown); an instance that never had any has none. Once the
 * instance is stopped, they are (being) finished: its teardown runs in the background and may not
 * have reached them yet, and `finish` is the one memoised step both share.
 */
function artifactsOf(registry: Registry, id: string): InstanceArtifacts | undefined {
  const rec = registry.get(id);
  const artifacts = rec.runtime?.artifacts;
  if (artifacts && !rec.live) void artifacts.finish();
  return artifacts;
}

export function artifactHandlers(registry: Registry): {
  listDownloads: Handler<'listDownloads'>;
  recordingStart: Handler<'recordingStart'>;
  recordingStop: Handler<'recordingStop'>;
  listRecordings: Handler<'listRecordings'>;
} {
  const live = (id: string) => {
    const rec = registry.running(id);
    const artifacts = rec.runtime.artifacts;
    if (!artifacts) {
      throw serverError('capability_unavailable', { what: 'Recording', type: rec.type });
    }
    return artifacts;
  };
  return {
    listDownloads: async ({ params }) =>
      (await artifactsOf(registry, params.instance_id)?.listDownloads()) ?? [],
    recordingStart: async ({ params }) => live(params.instance_id).startRecording(),
    recordingStop: async ({ params }) => {
      const artifacts = artifactsOf(registry, params.instance_id);
      if (!artifacts) throw serverError('no_recording');
      return artifacts.stopRecording();
    },
    listRecordings: async ({ params }) =>
      (await artifactsOf(registry, params.instance_id)?.listRecordings()) ?? [],
  };
}

function parse<S extends z.ZodType>(schema: S, value: unknown, where: Location): z.output<S> {
  const r = wireParse(schema, value);
  if (!r.success) throw new RequestInvalid(validationDetail(r.error, where, value));
  return r.data;
}

const fastifyPath = (p: string) => p.replace(/\{(\w+)\}/g, ':$1');

/** `GET …/downloads/{download_id}` and `GET …/recordings/{recording_id}`: the bytes, streamed. */
export function registerArtifactRoutes(app: FastifyInstance, registry: Registry): void {
  app.get(fastifyPath(operations.getDownload.path), async (req, reply) => {
    const { instance_id, download_id } = parse(DownloadPath, req.params, 'path');
    const artifacts = artifactsOf(registry, instance_id);
    if (!artifacts) throw serverError('download_not_found', { id: download_id });
    return send(reply, await artifacts.open('download', download_id));
  });
  app.get(fastifyPath(operations.getRecording.path), async (req, reply) => {
    const { instance_id, recording_id } = parse(RecordingPath, req.params, 'path');
    const artifacts = artifactsOf(registry, instance_id);
    if (!artifacts) throw serverError('recording_not_found', { id: recording_id });
    return send(reply, await artifacts.open('recording', recording_id));
  });
}

function send(reply: FastifyReply, file: OpenedArtifact) {
  // the file is closed however the answer ends (a client that goes away mid-stream included)
  reply.raw.once('close', () => file.stream.destroy());
  return reply
    .header('content-type', file.mime_type)
    .header('content-length', String(file.size))
    .header('content-disposition', contentDisposition(file.filename))
    .header('x-content-type-options', 'nosniff')
    .header('cache-control', 'no-store')
    .send(file.stream);
}
