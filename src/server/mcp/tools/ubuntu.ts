/** `ubuntu_*`: bash, the edit tool, file operations and code execution of an ubuntu instance. */
import { BashRequest, CodeExecuteRequest, EditRequest, FileRequest } from '../../../api/index.js';
import { defineTool, instanceId, text, toolResultContent, type Content } from './common.js';

export const ubuntuTools = [
  defineTool({
    name: 'ubuntu_bash',
    description:
      'Run a bash command in a persistent shell session of an ubuntu instance (sessions keep cd and exports).',
    input: BashRequest.extend({ instance_id: instanceId }),
    async handler(ctx, { instance_id, ...body }) {
      const id = ctx.target(instance_id);
      return ctx.about(id, toolResultContent(await ctx.backend.bash(id, body)));
    },
  }),
  defineTool({
    name: 'ubuntu_edit',
    description:
      'View, create and edit files on an ubuntu instance (view, create, str_replace, insert, undo_edit).',
    input: EditRequest.extend({ instance_id: instanceId }),
    async handler(ctx, { instance_id, ...body }) {
      const id = ctx.target(instance_id);
      return ctx.about(id, toolResultContent(await ctx.backend.edit(id, body)));
    },
  }),
  defineTool({
    name: 'ubuntu_file',
    description:
      'File operations on an ubuntu instance: read, write, append, delete, exists, list, mkdir, rmdir, move, copy, view, create, replace, insert, delete_lines, undo, grep.',
    input: FileRequest.extend({ instance_id: instanceId }),
    async handler(ctx, { instance_id, ...body }) {
      const id = ctx.target(instance_id);
      return ctx.about(id, toolResultContent(await ctx.backend.file(id, body)));
    },
  }),
  defineTool({
    name: 'ubuntu_code_execute',
    description:
      'Execute code in a Jupyter kernel of an ubuntu instance (default python3); state persists between calls.',
    input: CodeExecuteRequest.extend({ instance_id: instanceId }),
    async handler(ctx, { instance_id, ...body }) {
      const id = ctx.target(instance_id);
      const r = await ctx.backend.codeExecute(id, body);
      const parts: Content[] = [text(`status: ${r.status}`)];
      if (r.stdout) parts.push(text(r.stdout));
      if (r.stderr) parts.push(text(`stderr: ${r.stderr}`));
      for (const o of r.outputs) {
        const data = (o as { data?: Record<string, unknown> }).data;
        if (o.output_type === 'stream') continue; // already in stdout/stderr
        if (typeof data?.['image/png'] === 'string') {
          parts.push({ type: 'image', data: data['image/png'], mimeType: 'image/png' });
        } else if (typeof data?.['text/plain'] === 'string') {
          parts.push(text(data['text/plain']));
        }
      }
      if (r.error) parts.push(text(`${r.error.ename}: ${r.error.evalue}`));
      const result = await ctx.about(id, parts);
      return r.status === 'ok' ? result : { ...result, isError: true };
    },
  }),
];
