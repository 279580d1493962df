/**
 * Answers to what a page opens and waits on ("modal state"): a dialog (alert, confirm, prompt,
 * beforeunload) and a file chooser. Both are recorded when they open and named in the next tool
 * result; these tools answer them.
 *
 * Files come from the instance: `paths` are paths as its browser sees them (what
 * `POST /v1/instance/{instance_id}/upload` answers, or a file an ubuntu instance wrote). The MCP
 * server may run on another machine than the agent (`/mcp` on `burrow serve`), so paths on the
 * server would be the wrong files, and reading them for a remote client would expose the host.
 */
import { z } from 'zod';
import { browser, defineTool, instanceId, pageState, text } from './common.js';

export const dialogTools = [
  defineTool({
    name: 'browser_handle_dialog',
    description: 'Handle a dialog',
    input: z.object({
      accept: z.boolean().describe('Whether to accept the dialog.'),
      promptText: z
        .string()
        .optional()
        .describe('The text of the prompt in case of a prompt dialog.'),
      instance_id: instanceId,
    }),
    async handler(ctx, args) {
      const { id, page: p } = await browser(ctx, args.instance_id, { dialogOk: true });
      await p.handleDialog(args.accept, args.promptText);
      return ctx.about(id, [
        text(`${args.accept ? 'Accepted' : 'Dismissed'} the dialog`),
        pageState(await p.state()),
      ]);
    },
  }),
  defineTool({
    name: 'browser_file_upload',
    description:
      'Upload one or multiple files to the file chooser the page opened. Paths are on the instance (as its browser sees them: upload a file with POST /v1/instance/{instance_id}/upload first).',
    input: z.object({
      paths: z
        .array(z.string().min(1))
        .optional()
        .describe(
          'The absolute paths to the files to upload. Can be single file or multiple files. If omitted, file chooser is cancelled.',
        ),
      instance_id: instanceId,
    }),
    async handler(ctx, args) {
      const { id, page: p } = await browser(ctx, args.instance_id);
      await p.uploadFiles(args.paths);
      const n = args.paths?.length ?? 0;
      return ctx.about(id, [
        text(n > 0 ? `Set ${n} file${n > 1 ? 's' : ''}` : 'Cancelled the file chooser'),
        pageState(await p.state()),
      ]);
    },
  }),
];
