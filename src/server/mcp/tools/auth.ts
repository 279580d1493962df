/**
 * `auth_*`: save the browser's state as an auth state, apply one, list them; `extension_list`: the
 * uploaded browser extensions `instance_start` can load.
 */
import { z } from 'zod';
import { defineTool, instanceId, json, text } from './common.js';

export const authTools = [
  defineTool({
    name: 'auth_save',
    description: "Save the browser's cookies, localStorage and sessionStorage as an auth state.",
    input: z.object({
      name: z.string().min(1).optional().describe('Name of the auth state (default "default")'),
      instance_id: instanceId,
    }),
    async handler(ctx, args) {
      const id = ctx.target(args.instance_id);
      const saved = await ctx.backend.saveAuth(id, args.name);
      return ctx.about(id, [
        text(`Saved auth state ${saved.auth_state_id}${saved.name ? ` (${saved.name})` : ''}`),
      ]);
    },
  }),
  defineTool({
    name: 'auth_apply',
    description: 'Load a saved auth state (by id or unique name) into the browser.',
    input: z.object({
      auth_state: z.string().min(1).describe('Auth state id or unique name'),
      instance_id: instanceId,
    }),
    async handler(ctx, args) {
      const id = ctx.target(args.instance_id);
      const stateId = await ctx.applyAuth(id, args.auth_state);
      return ctx.about(id, [text(`Applied auth state ${stateId}`)]);
    },
  }),
  defineTool({
    name: 'extension_list',
    description:
      'List the browser extensions uploaded to the server (POST /v1/extensions); instance_start loads them by id in `extensions`.',
    input: z.object({}),
    annotations: { readOnlyHint: true },
    async handler(ctx) {
      return { content: [text(json(await ctx.backend.listExtensions()))] };
    },
  }),
  defineTool({
    name: 'auth_list',
    description: 'List saved auth states.',
    input: z.object({}),
    annotations: { readOnlyHint: true },
    async handler(ctx) {
      return { content: [text(json(await ctx.backend.listAuthStates()))] };
    },
  }),
];
