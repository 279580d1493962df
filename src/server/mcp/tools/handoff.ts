/**
 * `handoff_*` and `instance_extend`: lend the instance to a person (a second factor, a CAPTCHA)
 * through a live view with a message and a Done button, wait for them, and give an instance more
 * time. The agent shows the person the URL `handoff_request` answers, then calls `handoff_wait`
 * (each call waits at most 60 s; call it again while the status is `pending`).
 */
import { z } from 'zod';
import {
  ExtendRequest,
  HandoffRequest,
  HandoffWaitQuery,
  MAX_HANDOFF_WAIT_SECONDS,
} from '../../../api/index.js';
import { defineTool, instanceId, json, text } from './common.js';

export const handoffTools = [
  defineTool({
    name: 'handoff_request',
    description:
      'Hand the instance to a person for a step you cannot do (a login with a second factor, a CAPTCHA): answers a URL of a live view showing `message` and a Done button, valid until `timeout_seconds` (default 600) pass or the person presses Done. Give the URL to the user, then call handoff_wait.',
    input: HandoffRequest.extend({ instance_id: instanceId }),
    async handler(ctx, { instance_id, ...body }) {
      const id = ctx.target(instance_id);
      const h = await ctx.backend.handoff(id, body);
      return {
        content: [
          text(`Ask the user to open this URL, do what the message says and press Done:\n${h.url}`),
          text(json(h)),
        ],
      };
    },
  }),
  defineTool({
    name: 'handoff_wait',
    description: `Wait for a hand-off to end, up to \`wait_seconds\` (default 30, at most ${MAX_HANDOFF_WAIT_SECONDS}). Answers its status: "done" (the person pressed Done), "expired", "cancelled" (the instance stopped) or still "pending" (call again).`,
    input: z.object({
      instance_id: instanceId,
      handoff_id: z.string().min(1).describe('The handoff_id that handoff_request answered'),
      wait_seconds: HandoffWaitQuery.shape.wait_seconds,
    }),
    annotations: { readOnlyHint: true },
    async handler(ctx, args) {
      const id = ctx.target(args.instance_id);
      const h = await ctx.backend.handoffStatus(id, args.handoff_id, args.wait_seconds);
      return ctx.about(id, [text(`Hand-off ${h.handoff_id}: ${h.status}`), text(json(h))]);
    },
  }),
  defineTool({
    name: 'instance_extend',
    description:
      'Set the instance to expire `timeout_hours` from now (0.01 to 24; replaces the time it had left).',
    input: ExtendRequest.extend({ instance_id: instanceId }),
    async handler(ctx, { instance_id, ...body }) {
      const id = ctx.target(instance_id);
      const inst = await ctx.backend.extend(id, body);
      return ctx.about(id, [
        text(`Instance ${id} now expires at ${inst.expires_at ?? '(unknown)'}`),
        text(json(inst)),
      ]);
    },
  }),
];
