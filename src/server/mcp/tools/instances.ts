/** `instance_*`: start, list, stop an instance, and the URL of its active tab. */
import { z } from 'zod';
import { INSTANCE_TYPES, StartRequest, type Instance } from '../../../api/index.js';
import { defineTool, instanceId, json, text } from './common.js';

export const instanceTools = [
  defineTool({
    name: 'instance_start',
    description:
      'Start a remote instance: "browser" (Chromium) or "ubuntu" (a Linux desktop with bash, files, code execution and a browser). Returns its id and live-view URL; later tools act on it by default. It is stopped when this MCP session ends.',
    input: StartRequest.extend({
      instance_type: z.enum(INSTANCE_TYPES).describe('"browser" or "ubuntu"'),
      auth_state: z
        .string()
        .min(1)
        .optional()
        .describe('A saved auth state (id or unique name) to apply to the browser once started'),
    }),
    async handler(ctx, { auth_state, ...body }) {
      const inst = await ctx.start(body);
      if (auth_state !== undefined) await ctx.applyAuth(inst.id, auth_state);
      return ctx.about(inst.id, [
        text(`Started ${inst.instance_type} instance ${inst.id}`),
        text(json(inst)),
      ]);
    },
  }),
  defineTool({
    name: 'instance_list',
    description: 'List the instances of the server.',
    input: z.object({}),
    annotations: { readOnlyHint: true },
    async handler(ctx) {
      const list: Instance[] = await ctx.backend.list();
      return { content: [text(json(list))] };
    },
  }),
  defineTool({
    name: 'instance_stop',
    description: 'Stop an instance (default: the one this session started last).',
    input: z.object({ instance_id: instanceId }),
    annotations: { destructiveHint: true },
    async handler(ctx, args) {
      const id = ctx.target(args.instance_id);
      await ctx.stop(id);
      return { content: [text(`Stopped instance ${id}`)] };
    },
  }),
  defineTool({
    name: 'instance_current_url',
    description: "URL of the instance's active browser tab.",
    input: z.object({ instance_id: instanceId }),
    annotations: { readOnlyHint: true },
    async handler(ctx, args) {
      const id = ctx.target(args.instance_id);
      return ctx.about(id, [text(await ctx.backend.currentUrl(id))]);
    },
  }),
];
