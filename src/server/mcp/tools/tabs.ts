/** `browser_tabs`: list, open, close and select the tabs of the instance's browser. */
import { z } from 'zod';
import { McpToolFailure } from '../backend.js';
import { browser, defineTool, instanceId, text } from './common.js';

export const tabTools = [
  defineTool({
    name: 'browser_tabs',
    description: 'List, create, close, or select a browser tab.',
    input: z.object({
      action: z.enum(['list', 'new', 'close', 'select']).describe('Operation to perform'),
      index: z
        .int()
        .min(0)
        .optional()
        .describe('Tab index, used for close/select. If omitted for close, current tab is closed.'),
      url: z.string().optional().describe('For "new": a URL to open in the new tab'),
      instance_id: instanceId,
    }),
    async handler(ctx, args) {
      const { id, page: p } = await browser(ctx, args.instance_id, { dialogOk: true });
      if (args.action === 'new') await p.newTab(args.url);
      else if (args.action === 'close') await p.closeTab(args.index);
      else if (args.action === 'select') {
        if (args.index === undefined) {
          throw new McpToolFailure('"select" needs an index', 'validation_error');
        }
        await p.selectTab(args.index);
      }
      const tabs = await p.tabs();
      const lines = tabs.map(
        (t) => `- ${t.index}:${t.current ? ' (current)' : ''} [${t.title}] (${t.url})`,
      );
      return ctx.about(id, [text(`### Open tabs\n${lines.join('\n')}`)]);
    },
  }),
];
