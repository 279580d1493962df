/** Browser tools that move the tab or look at it: navigate, back, snapshot, wait, screenshot. */
import { z } from 'zod';
import { McpToolFailure } from '../backend.js';
import { browser, defineTool, element, instanceId, pageState, ref, text } from './common.js';

export const navigationTools = [
  defineTool({
    name: 'browser_navigate',
    description: 'Navigate to a URL',
    input: z.object({
      url: z.string().describe('The URL to navigate to'),
      instance_id: instanceId,
    }),
    async handler(ctx, args) {
      const { id, page: p } = await browser(ctx, args.instance_id);
      await p.navigate(args.url);
      return ctx.about(id, [text(`Navigated to ${args.url}`), pageState(await p.state())]);
    },
  }),
  defineTool({
    name: 'browser_navigate_back',
    description: 'Go back to the previous page',
    input: z.object({ instance_id: instanceId }),
    async handler(ctx, args) {
      const { id, page: p } = await browser(ctx, args.instance_id);
      await p.back();
      return ctx.about(id, [pageState(await p.state())]);
    },
  }),
  defineTool({
    name: 'browser_snapshot',
    description:
      'Capture accessibility snapshot of the current page, this is better than screenshot',
    input: z.object({ instance_id: instanceId }),
    annotations: { readOnlyHint: true },
    async handler(ctx, args) {
      const { id, page: p } = await browser(ctx, args.instance_id, { dialogOk: true });
      return ctx.about(id, [pageState(await p.state())]);
    },
  }),
  defineTool({
    name: 'browser_wait_for',
    description: 'Wait for text to appear or disappear or a specified time to pass',
    input: z.object({
      time: z.number().min(0).max(60).optional().describe('The time to wait in seconds'),
      text: z.string().optional().describe('The text to wait for'),
      textGone: z.string().optional().describe('The text to wait for to disappear'),
      instance_id: instanceId,
    }),
    async handler(ctx, args) {
      if (args.time === undefined && args.text === undefined && args.textGone === undefined) {
        throw new McpToolFailure('Give text, textGone or time', 'validation_error');
      }
      const { id, page: p } = await browser(ctx, args.instance_id);
      await p.waitFor({
        ...(args.time !== undefined && { time: args.time }),
        ...(args.text !== undefined && { text: args.text }),
        ...(args.textGone !== undefined && { textGone: args.textGone }),
      });
      return ctx.about(id, [text('Waited'), pageState(await p.state())]);
    },
  }),
  defineTool({
    name: 'browser_take_screenshot',
    description:
      "Take a screenshot of the current page (returned as an image). You can't perform actions based on the screenshot, use browser_snapshot for actions.",
    input: z.object({
      type: z.enum(['png', 'jpeg']).optional().describe('Image format. Default is png.'),
      filename: z
        .string()
        .optional()
        .describe('Accepted for compatibility; the image is returned, not saved'),
      element: element.optional(),
      ref: ref.optional(),
      fullPage: z
        .boolean()
        .optional()
        .describe('Take a screenshot of the full scrollable page instead of the viewport'),
      instance_id: instanceId,
    }),
    annotations: { readOnlyHint: true },
    async handler(ctx, args) {
      const { id, page: p } = await browser(ctx, args.instance_id);
      const shot = await p.screenshot({
        ...(args.type && { type: args.type }),
        ref: args.ref,
        fullPage: args.fullPage,
      });
      return ctx.about(id, [{ type: 'image', ...shot }]);
    },
  }),
];
