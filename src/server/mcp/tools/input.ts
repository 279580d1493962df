/** Browser tools that act on an element of the snapshot: click, type, hover, select, evaluate. */
import { z } from 'zod';
import { defineTool, element, instanceId, json, pageState, ref, text } from './common.js';

export const inputTools = [
  defineTool({
    name: 'browser_click',
    description: 'Perform click on a web page',
    input: z.object({
      element,
      ref,
      doubleClick: z
        .boolean()
        .optional()
        .describe('Whether to perform a double click instead of a single click'),
      button: z
        .enum(['left', 'right', 'middle'])
        .optional()
        .describe('Button to click, defaults to left'),
      modifiers: z
        .array(z.enum(['Alt', 'Control', 'ControlOrMeta', 'Meta', 'Shift']))
        .optional()
        .describe('Modifier keys to press'),
      instance_id: instanceId,
    }),
    async handler(ctx, args) {
      const id = ctx.target(args.instance_id);
      const p = await ctx.page(id);
      await p.click(args.ref, {
        ...(args.button && { button: args.button }),
        ...(args.doubleClick && { doubleClick: true }),
        ...(args.modifiers && { modifiers: args.modifiers }),
      });
      return ctx.about(id, [text(`Clicked ${args.element}`), pageState(await p.state())]);
    },
  }),
  defineTool({
    name: 'browser_type',
    description: 'Type text into editable element',
    input: z.object({
      element,
      ref,
      text: z.string().describe('Text to type into the element'),
      submit: z.boolean().optional().describe('Whether to submit entered text (press Enter after)'),
      slowly: z
        .boolean()
        .optional()
        .describe('Accepted for compatibility; text is always inserted at once'),
      instance_id: instanceId,
    }),
    async handler(ctx, args) {
      const id = ctx.target(args.instance_id);
      const p = await ctx.page(id);
      await p.type(args.ref, args.text, args.submit ?? false);
      return ctx.about(id, [text(`Typed into ${args.element}`), pageState(await p.state())]);
    },
  }),
  defineTool({
    name: 'browser_hover',
    description: 'Hover over element on page',
    input: z.object({ element, ref, instance_id: instanceId }),
    async handler(ctx, args) {
      const id = ctx.target(args.instance_id);
      const p = await ctx.page(id);
      await p.hover(args.ref);
      return ctx.about(id, [text(`Hovered ${args.element}`), pageState(await p.state())]);
    },
  }),
  defineTool({
    name: 'browser_select_option',
    description: 'Select an option in a dropdown',
    input: z.object({
      element,
      ref,
      values: z
        .array(z.string())
        .describe(
          'Array of values to select in the dropdown. This can be a single value or multiple values.',
        ),
      instance_id: instanceId,
    }),
    async handler(ctx, args) {
      const id = ctx.target(args.instance_id);
      const p = await ctx.page(id);
      const picked = await p.selectOption(args.ref, args.values);
      return ctx.about(id, [
        text(`Selected ${JSON.stringify(picked)} in ${args.element}`),
        pageState(await p.state()),
      ]);
    },
  }),
  defineTool({
    name: 'browser_evaluate',
    description: 'Evaluate JavaScript expression on page or element',
    input: z.object({
      function: z
        .string()
        .describe('() => { /* code */ } or (element) => { /* code */ } when element is provided'),
      element: element.optional(),
      ref: ref.optional(),
      instance_id: instanceId,
    }),
    async handler(ctx, args) {
      const id = ctx.target(args.instance_id);
      const value = await (await ctx.page(id)).evaluate(args.function, args.ref);
      return ctx.about(id, [text(value === undefined ? 'undefined' : json(value))]);
    },
  }),
];
