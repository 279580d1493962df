/** The browser as a whole: its viewport, its console and requests, closing it. */
import { z } from 'zod';
import { browser, defineTool, instanceId, pageState, text } from './common.js';

export const browserTools = [
  defineTool({
    name: 'browser_resize',
    description: 'Resize the browser window',
    input: z.object({
      width: z.int().min(1).max(10_000).describe('Width of the browser window'),
      height: z.int().min(1).max(10_000).describe('Height of the browser window'),
      instance_id: instanceId,
    }),
    async handler(ctx, args) {
      const { id, page: p } = await browser(ctx, args.instance_id);
      await p.resize(args.width, args.height);
      return ctx.about(id, [
        text(`Resized the viewport to ${args.width}×${args.height}`),
        pageState(await p.state()),
      ]);
    },
  }),
  defineTool({
    name: 'browser_console_messages',
    description: 'Returns all console messages',
    input: z.object({
      onlyErrors: z.boolean().optional().describe('Only return error messages'),
      instance_id: instanceId,
    }),
    annotations: { readOnlyHint: true },
    async handler(ctx, args) {
      const { id, page: p } = await browser(ctx, args.instance_id, { dialogOk: true });
      const messages = p
        .consoleMessages()
        .filter((m) => !args.onlyErrors || m.type === 'error')
        .map((m) => `[${m.type.toUpperCase()}] ${m.text}`);
      return ctx.about(id, [
        text(messages.length > 0 ? messages.join('\n') : 'No console messages'),
      ]);
    },
  }),
  defineTool({
    name: 'browser_network_requests',
    description: 'Returns all network requests since loading the page',
    input: z.object({
      includeStatic: z
        .boolean()
        .optional()
        .describe('Whether to include successful static resources like images, fonts, scripts'),
      instance_id: instanceId,
    }),
    annotations: { readOnlyHint: true },
    async handler(ctx, args) {
      const { id, page: p } = await browser(ctx, args.instance_id, { dialogOk: true });
      const isStatic = new Set(['Image', 'Font', 'Stylesheet', 'Script', 'Media']);
      const lines = p
        .networkRequests()
        .filter(
          (r) =>
            args.includeStatic === true ||
            !isStatic.has(r.resourceType) ||
            r.failure !== undefined ||
            (r.status ?? 0) >= 400,
        )
        .map((r) => {
          const outcome =
            r.failure !== undefined
              ? `FAILED ${r.failure}`
              : r.status !== undefined
                ? `[${r.status}] ${r.statusText ?? ''}`.trim()
                : 'pending';
          return `[${r.method}] ${r.url} => ${outcome}`;
        });
      return ctx.about(id, [text(lines.length > 0 ? lines.join('\n') : 'No requests')]);
    },
  }),
  defineTool({
    name: 'browser_close',
    description: 'Close the page',
    input: z.object({ instance_id: instanceId }),
    annotations: { destructiveHint: true },
    async handler(ctx, args) {
      // burrow's browser is the instance: closing it stops the instance (the next browser_*
      // call starts a new one, as Playwright's server relaunches its browser)
      const id = args.instance_id ?? ctx.started.at(-1);
      if (id === undefined) return { content: [text('No browser to close')] };
      await ctx.stop(id);
      return { content: [text(`Closed the browser: stopped instance ${id}`)] };
    },
  }),
];
